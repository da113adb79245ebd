// SPDX-License-Identifier: MIT OR GPL-2.0
//
// xsk_steer: the XDP program on every router port.
//
// Transit frames go to the AF_XDP socket of the queue they arrived on (the forwarding
// worker's ring); control traffic goes up the kernel stack (XDP_PASS), where the control
// plane on core 0 reads it with an AF_PACKET socket. Keeping control frames out of the
// worker's ring means a forwarding flood never delays an ARP reply or a neighbour
// solicitation.
//
//   frame ─┬─ dst MAC broadcast/multicast ─────────────────┐
//          ├─ ARP ──────────────────────────────────────────┤
//          ├─ IPv4 to one of our addresses (local4) ────────┤
//          ├─ IPv6 to ff00::/8, fe80::/10 or ours (local6) ─┼──▶ XDP_PASS (control plane)
//          ├─ ICMPv6 133..137 (RS, RA, NS, NA, redirect) ───┘
//          └─ everything else, malformed frames included ─────▶ xsks[rx_queue] (worker)
//
// A malformed frame (too short for its headers) goes to the worker on purpose: the worker
// parses with the same rules as for every frame and counts the drop under a named reason.
// With no socket registered for the queue, bpf_redirect_map falls back to XDP_PASS and the
// frame is counted as xsk_missing.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/icmpv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

// Counter slots in `counters` (user space reads the per-CPU values and sums them).
#define CNT_REDIRECTED 0
#define CNT_PASSED_CONTROL 1
#define CNT_XSK_MISSING 2
#define CNT_MAX 3

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

// The router's own IPv4 addresses, in network byte order, as keys.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u8);
} local4 SEC(".maps");

struct addr6 {
	__u8 b[16];
};

// The router's own IPv6 addresses.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct addr6);
	__type(value, __u8);
} local6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 slot)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &slot);

	if (c)
		*c += 1;
}

static __always_inline int pass_control(void)
{
	count(CNT_PASSED_CONTROL);
	return XDP_PASS;
}

// True when the frame is control traffic for the kernel.
static __always_inline int is_control(void *data, void *end)
{
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > end)
		return 0;
	// Group bit of the destination: broadcast and every multicast.
	if (eth->h_dest[0] & 1)
		return 1;

	__u16 proto = eth->h_proto;

	if (proto == bpf_htons(ETH_P_ARP))
		return 1;

	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > end)
			return 0;
		__u32 dst = ip->daddr;

		return bpf_map_lookup_elem(&local4, &dst) != NULL;
	}

	if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > end)
			return 0;
		__u8 d0 = ip6->daddr.in6_u.u6_addr8[0];
		__u8 d1 = ip6->daddr.in6_u.u6_addr8[1];

		// ff00::/8 multicast, fe80::/10 link-local.
		if (d0 == 0xff || (d0 == 0xfe && (d1 & 0xc0) == 0x80))
			return 1;
		if (ip6->nexthdr == IPPROTO_ICMPV6) {
			struct icmp6hdr *icmp = (void *)(ip6 + 1);

			if ((void *)(icmp + 1) <= end && icmp->icmp6_type >= 133 &&
			    icmp->icmp6_type <= 137)
				return 1;
		}
		struct addr6 key;

		__builtin_memcpy(key.b, ip6->daddr.in6_u.u6_addr8, 16);
		return bpf_map_lookup_elem(&local6, &key) != NULL;
	}
	return 0;
}

SEC("xdp")
int xsk_steer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 q = ctx->rx_queue_index;

	if (is_control(data, end))
		return pass_control();
	if (!bpf_map_lookup_elem(&xsks, &q)) {
		count(CNT_XSK_MISSING);
		return XDP_PASS;
	}
	count(CNT_REDIRECTED);
	return bpf_redirect_map(&xsks, q, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
