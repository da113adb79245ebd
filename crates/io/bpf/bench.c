// SPDX-License-Identifier: MIT OR GPL-2.0
//
// The XDP programs of `vfsr fwd bench --veth`:
//
//   gen      the traffic generator, run with BPF_PROG_RUN and BPF_F_TEST_XDP_LIVE_FRAMES:
//            each run takes the 64-byte UDP template, writes a destination picked at random
//            from `dests` into it, fixes the IPv4 checksum and transmits it (XDP_TX) out of
//            the generator's veth;
//   fib_fwd  the in-kernel XDP forwarder Linux users would compare against: bpf_fib_lookup
//            in the kernel's own FIB and neighbour table, TTL decrement, redirect to the
//            egress port through a devmap;
//   sink     on the sink's veth: counts and drops the benchmark's UDP frames (port 9),
//            passes everything else (ping, ARP) to the stack;
//   pass     XDP_PASS, so a veth peer accepts frames sent with XDP_TX or redirect.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#ifndef AF_INET
#define AF_INET 2
#endif

#define BENCH_PORT 9

// Destinations (network byte order). `conf[0]` is the index mask (a power of two minus 1),
// `conf[1]` the interval between frames in nanoseconds (0: as fast as possible).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << 20);
	__type(key, __u32);
	__type(value, __u32);
} dests SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} conf SEC(".maps");

// The frame's headers (Ethernet, IPv4, UDP: 42 bytes). Written into every frame on every
// run: live frames come back from the receiver's page pool as the receiver left them (a
// forwarding router rewrites the MACs and the TTL in place).
struct head {
	__u8 b[42];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct head);
} tmpl SEC(".maps");

// The time the next paced frame is due (per CPU).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} due SEC(".maps");

// gen: frames sent (0) and runs skipped by pacing (1); sink: bench frames dropped (0) and
// other frames passed (1);
// fib_fwd: forwarded (0) and passed to the stack (1).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} ports SEC(".maps");

static __always_inline void count(__u32 slot)
{
	__u64 *c = bpf_map_lookup_elem(&counts, &slot);
	if (c)
		*c += 1;
}

static __always_inline __u16 ip_checksum(struct iphdr *ip)
{
	__u32 sum = 0;
	__u16 *w = (__u16 *)ip;
#pragma unroll
	for (int i = 0; i < 10; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

SEC("xdp")
int gen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	if (data + sizeof(struct head) > end)
		return XDP_ABORTED;
	__u32 zero = 0, one = 1;
	struct head *h = bpf_map_lookup_elem(&tmpl, &zero);
	if (!h)
		return XDP_ABORTED;
	__u64 *mask = bpf_map_lookup_elem(&conf, &zero);
	__u64 *interval = bpf_map_lookup_elem(&conf, &one);
	__u64 *next = bpf_map_lookup_elem(&due, &zero);
	if (!mask || !interval || !next)
		return XDP_ABORTED;
	// Pacing: a run before the next frame is due sends nothing, so frames leave evenly
	// spaced instead of in bursts; a backlog of more than 32 intervals is forgotten.
	if (*interval) {
		__u64 now = bpf_ktime_get_ns();
		if (now < *next) {
			count(1);
			return XDP_DROP;
		}
		if (*next + 32 * *interval < now)
			*next = now;
		*next += *interval;
	}
	__u32 i = bpf_get_prandom_u32() & (__u32)*mask;
	__u32 *dst = bpf_map_lookup_elem(&dests, &i);
	if (!dst)
		return XDP_ABORTED;
	__builtin_memcpy(data, h->b, sizeof(struct head));
	ip->daddr = *dst;
	ip->check = 0;
	ip->check = ip_checksum(ip);
	count(0);
	return XDP_TX;
}

SEC("xdp")
int fib_fwd(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	if (ip->ttl <= 1)
		return XDP_PASS;
	struct bpf_fib_lookup p = {};
	p.family = AF_INET;
	p.tos = ip->tos;
	p.l4_protocol = ip->protocol;
	p.tot_len = bpf_ntohs(ip->tot_len);
	p.ipv4_src = ip->saddr;
	p.ipv4_dst = ip->daddr;
	p.ifindex = ctx->ingress_ifindex;
	int rc = bpf_fib_lookup(ctx, &p, sizeof(p), 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS) {
		count(1);
		return XDP_PASS;
	}
	// TTL - 1 with the incremental checksum update of RFC 1624.
	__u32 check = ip->check;
	check += bpf_htons(0x0100);
	ip->check = (__u16)(check + (check >= 0xffff));
	ip->ttl--;
	__builtin_memcpy(eth->h_dest, p.dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, p.smac, ETH_ALEN);
	count(0);
	return bpf_redirect_map(&ports, p.ifindex, 0);
}

SEC("xdp")
int sink(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	if ((void *)(udp + 1) <= end && eth->h_proto == bpf_htons(ETH_P_IP) &&
	    ip->ihl == 5 && ip->protocol == IPPROTO_UDP && udp->dest == bpf_htons(BENCH_PORT)) {
		count(0);
		return XDP_DROP;
	}
	count(1);
	return XDP_PASS;
}

SEC("xdp")
int pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
