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
//          │     (a policed class over its rate ──────────────────▶ XDP_DROP, counted)
//          └─ everything else, malformed frames included ─────▶ xsks[rx_queue] (worker)
//
// Four control classes are policed here, before the kernel sees them, by the pipeline's
// rules (the worker's punt_class): ARP and neighbor discovery (ARP, ICMPv6 133..137); ICMP
// to the router (IPv4 protocol 1, ICMPv6 other than ND and MLD); and, for frames sent to one
// of the router's own addresses, routing protocols (IGMP, OSPF, PIM, VRRP, MLD, BGP on TCP
// 179, RIP, RIPng, BFD on UDP 520, 521, 3784, 3785, 4784) and everything else to the
// router (ssh, SNMP, ...). A flood of any of them would otherwise cost the kernel's receive
// path and the control plane's raw socket a read per frame, ahead of the BGP or ssh segment
// queued behind it, before the control plane's own token bucket dropped it. Each class has
// one token bucket per CPU (police_cfg, set by user space from the `[punt]` rates, the same
// arithmetic as the control plane's bucket); a frame without a token is dropped and counted
// (CNT_POLICED_*). What passes still meets the control plane's bucket, the exact limit: with
// n CPUs receiving, the program lets through at most n times the rate. TCP connection
// attempts (SYN without ACK) to the router, routing or local, take their token from a fifth
// bucket of their own (`[punt] tcp_syn`) and are counted under their class: a SYN flood
// then spends the SYN bucket, not the tokens the segments of established sessions (BGP,
// ssh) need from their class's bucket here and in the control plane. Frames this program
// cannot class as the pipeline would are not policed here (CTL_OTHER): group-addressed
// frames other than ARP, ND and ICMP, IPv6 with extension headers, IPv4 with a header
// shorter than 20 bytes.
//
// A malformed frame (too short for its headers) goes to the worker on purpose: the worker
// parses with the same rules as for every frame and counts the drop under a named reason.
// With no socket registered for the queue, bpf_redirect_map falls back to XDP_PASS and the
// frame is counted as xsk_missing.
//
// The fast path (off until user space sets fastctl.on): a destination flow table as in
// FreeBSD's flowtable (Li & Macy, section 4.2: "hashing the destination IP, the cached L3 entry
// supplies the output interface and the cached L2 entry the destination MAC"), kept in the
// receive hook. The worker's pipeline decides every packet it sees; when a decision depends
// on the destination alone (one next hop, its MAC resolved, the packet fits the MTU), the
// worker stores it in fast4/fast6 under the current generation. A later transit frame to
// that destination that passes the same checks the pipeline makes (RFC 1812 5.2.2 for IPv4,
// RFC 8200 for IPv6; anything unusual goes to the worker) is rewritten here (MACs, TTL with
// the RFC 1624 update) and redirected to the egress port, never crossing into user space.
// The control plane bumps fastctl.gen after it publishes any neighbor change, which retires
// every entry at once; misses, stale entries and every other frame take the normal path.
//
//          └─ transit ─┬─ fast path on, checks pass, fresh entry ─▶ devmap tx_ports[port]
//                      └─ otherwise ─────────────────────────────▶ xsks[rx_queue] (worker)

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
#define CNT_FAST_FORWARDED 3
#define CNT_FAST_STALE 4
// One per policed class, in the order of the CTL_ classes below (CNT_POLICED_ARP_ND + class).
#define CNT_POLICED_ARP_ND 5
#define CNT_POLICED_ICMP 6
#define CNT_POLICED_ROUTING 7
#define CNT_POLICED_LOCAL 8
#define CNT_MAX 9

// What control_class found: not control, or control of a class (the policed ones by their
// key in police_cfg).
#define CTL_NONE -1
#define CTL_ARP_ND 0
#define CTL_ICMP 1
#define CTL_ROUTING 2
#define CTL_LOCAL 3
#define CTL_OTHER 4
#define POLICED_CLASSES 4
// police_cfg/police_state key of the bucket of TCP connection attempts to the router.
#define BUCKET_SYN 4
#define POLICED_BUCKETS 5

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

// One cached decision: where frames to a destination leave and with which MACs.
struct fast_nh {
	__u32 gen;	// fastctl.gen when the worker made the decision
	__u32 port;	// key of the egress device in tx_ports
	__u8 dmac[6];	// the next hop's MAC
	__u8 smac[6];	// the egress port's MAC
	__u16 mtu;	// the egress port's IP MTU
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 262144);
	__type(key, __u32);
	__type(value, struct fast_nh);
} fast4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct addr6);
	__type(value, struct fast_nh);
} fast6 SEC(".maps");

// Slot 0: the fast path's switch, its generation and this port's MAC.
struct fast_ctl {
	__u32 gen;
	__u32 on;
	__u8 mac[6];
	__u8 pad[2];
};

// Mapped into user space: the workers read the generation and the control plane bumps it
// with plain atomic operations, no system call.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fast_ctl);
} fastctl SEC(".maps");

// A policed class's bucket, written by user space (vfsr_io::xdp::Policer). Credit is
// counted as in the control plane's TokenBucket: a token costs 10^9 units and each
// nanosecond adds `rate` units, so every integer rate is exact.
struct police_cfg {
	__u32 on;	// 0: not policed (a program user space has not configured)
	__u32 rate;	// tokens per second (0: drop every frame of the class)
	__u64 cap;	// burst x 10^9
	__u64 fill_ns;	// nanoseconds that fill an empty bucket (cap / rate, rounded up)
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, POLICED_BUCKETS);
	__type(key, __u32);
	__type(value, struct police_cfg);
} police_cfg SEC(".maps");

// Each CPU's bucket: no atomics in the receive path.
struct police_state {
	__u64 credit;
	__u64 last;	// bpf_ktime_get_ns() of the last refill; 0 before the first frame
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, POLICED_BUCKETS);
	__type(key, __u32);
	__type(value, struct police_state);
} police_state SEC(".maps");

// Egress devices by the router's port number.
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} tx_ports SEC(".maps");

// The generation is written by user space through the mapping.
#define READ_ONCE_GEN(ctl) (*(volatile __u32 *)&(ctl)->gen)

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

// The class of a frame to one of the router's addresses by its upper-layer protocol and
// ports, as the pipeline's punt_class has it: routing protocols by number, BGP by TCP port,
// RIP, RIPng and BFD by UDP port, everything else local. `l4` is the upper-layer header,
// `later_fragment` a fragment other than the first (no ports: local, as in the pipeline).
// `*syn` is set for a TCP segment with SYN and without ACK (a connection attempt).
static __always_inline int upper_class(__u8 proto, void *l4, void *end, int later_fragment,
				       int *syn)
{
	if (proto == IPPROTO_IGMP || proto == 89 || proto == IPPROTO_PIM || proto == 112)
		return CTL_ROUTING;
	if ((proto != IPPROTO_TCP && proto != IPPROTO_UDP) || later_fragment)
		return CTL_LOCAL;
	__be16 *ports = l4;

	if ((void *)(ports + 2) > end)
		return CTL_LOCAL;
	__u16 sport = bpf_ntohs(ports[0]);
	__u16 dport = bpf_ntohs(ports[1]);

	if (proto == IPPROTO_TCP) {
		__u8 *flags = (__u8 *)l4 + 13;

		if ((void *)(flags + 1) <= end && (*flags & 0x12) == 0x02)
			*syn = 1;
		return (sport == 179 || dport == 179) ? CTL_ROUTING : CTL_LOCAL;
	}
#pragma unroll
	for (int i = 0; i < 2; i++) {
		__u16 p = i ? dport : sport;

		if (p == 520 || p == 521 || p == 3784 || p == 3785 || p == 4784)
			return CTL_ROUTING;
	}
	return CTL_LOCAL;
}

// The class of a control frame for the kernel (CTL_*), or CTL_NONE for transit. The test
// is the pipeline's: the class follows its punt_class for frames without IPv6 extension
// headers (those are CTL_OTHER here and classified by the control plane). `*syn` is set
// for a TCP connection attempt to one of the router's addresses.
static __always_inline int control_class(void *data, void *end, int *syn)
{
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > end)
		return CTL_NONE;
	__u16 proto = eth->h_proto;

	if (proto == bpf_htons(ETH_P_ARP))
		return CTL_ARP_ND;
	// Group bit of the destination: broadcast and every multicast.
	int group = eth->h_dest[0] & 1;

	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > end)
			return group ? CTL_OTHER : CTL_NONE;
		__u32 dst = ip->daddr;

		if (!group && bpf_map_lookup_elem(&local4, &dst) == NULL)
			return CTL_NONE;
		if (ip->protocol == IPPROTO_ICMP)
			return CTL_ICMP;
		__u32 hl = ip->ihl * 4;

		if (group || hl < sizeof(*ip))
			return CTL_OTHER;
		int later = (bpf_ntohs(ip->frag_off) & 0x1fff) != 0;

		return upper_class(ip->protocol, (void *)ip + hl, end, later, syn);
	}

	if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > end)
			return group ? CTL_OTHER : CTL_NONE;
		int control = group;
		__u8 d0 = ip6->daddr.in6_u.u6_addr8[0];
		__u8 d1 = ip6->daddr.in6_u.u6_addr8[1];

		// ff00::/8 multicast, fe80::/10 link-local.
		if (d0 == 0xff || (d0 == 0xfe && (d1 & 0xc0) == 0x80))
			control = 1;
		int icmp_type = -1;

		if (ip6->nexthdr == IPPROTO_ICMPV6) {
			struct icmp6hdr *icmp = (void *)(ip6 + 1);

			if ((void *)(icmp + 1) <= end)
				icmp_type = icmp->icmp6_type;
		}
		if (icmp_type >= 133 && icmp_type <= 137)
			return CTL_ARP_ND;
		if (!control) {
			struct addr6 key;

			__builtin_memcpy(key.b, ip6->daddr.in6_u.u6_addr8, 16);
			if (bpf_map_lookup_elem(&local6, &key) == NULL)
				return CTL_NONE;
		}
		if (ip6->nexthdr == IPPROTO_ICMPV6) {
			if (icmp_type < 0)
				return CTL_OTHER;
			// MLD is a routing protocol's; policed only when sent to our address.
			if ((icmp_type >= 130 && icmp_type <= 132) || icmp_type == 143)
				return control ? CTL_OTHER : CTL_ROUTING;
			return CTL_ICMP;
		}
		// To a group or a link-local address: left to the control plane.
		if (control)
			return CTL_OTHER;
		__u8 nx = ip6->nexthdr;

		// Extension headers: the pipeline walks the chain, this program does not.
		if (nx == 0 || nx == 43 || nx == 44 || nx == 60 || nx == 51)
			return CTL_OTHER;
		return upper_class(nx, ip6 + 1, end, 0, syn);
	}
	return group ? CTL_OTHER : CTL_NONE;
}

// Takes a token from bucket `bucket` (a class, or BUCKET_SYN) on this CPU: 1 when the frame
// may pass.
static __always_inline int police(int bucket)
{
	if (bucket < 0 || bucket >= POLICED_BUCKETS)
		return 1;
	__u32 key = bucket;
	struct police_cfg *cfg = bpf_map_lookup_elem(&police_cfg, &key);
	struct police_state *st = bpf_map_lookup_elem(&police_state, &key);

	if (!cfg || !st || !cfg->on)
		return 1;
	if (cfg->rate == 0)
		return 0;
	__u64 now = bpf_ktime_get_ns();

	if (st->last == 0) {
		// The first frame on this CPU: a full bucket.
		st->credit = cfg->cap;
		st->last = now;
	} else if (now > st->last) {
		__u64 elapsed = now - st->last;

		// elapsed < fill_ns keeps elapsed x rate below cap + rate: no overflow.
		if (elapsed >= cfg->fill_ns)
			st->credit = cfg->cap;
		else
			st->credit += elapsed * cfg->rate;
		if (st->credit > cfg->cap)
			st->credit = cfg->cap;
		st->last = now;
	}
	if (st->credit < 1000000000ULL)
		return 0;
	st->credit -= 1000000000ULL;
	return 1;
}

static __always_inline int mac_eq(const __u8 *a, const __u8 *b)
{
	return ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]) |
		(a[4] ^ b[4]) | (a[5] ^ b[5])) == 0;
}

// Looks the entry up and checks that it is current and the packet fits; NULL otherwise.
static __always_inline struct fast_nh *fresh(struct fast_nh *nh, const struct fast_ctl *ctl,
					     __u32 ip_len)
{
	if (!nh)
		return NULL;
	if (nh->gen != READ_ONCE_GEN(ctl)) {
		count(CNT_FAST_STALE);
		return NULL;
	}
	if (ip_len > nh->mtu)
		return NULL;
	return nh;
}

static __always_inline int fast_out(struct ethhdr *eth, const struct fast_nh *nh)
{
	__builtin_memcpy(eth->h_dest, nh->dmac, 6);
	__builtin_memcpy(eth->h_source, nh->smac, 6);
	count(CNT_FAST_FORWARDED);
	return bpf_redirect_map(&tx_ports, nh->port, XDP_ABORTED);
}

// IPv4 with the checks of the pipeline's ip4_input, classify and ttl stages: a 20-byte
// header (options go to the worker), total length within the frame, a valid checksum, a
// source that is not martian (0/8, 127/8, 224/4 and above), TTL above 1. The destination
// needs no check here: only destinations the pipeline forwarded are in the table.
static __always_inline int fast4_path(struct ethhdr *eth, void *end, const struct fast_ctl *ctl)
{
	struct iphdr *ip = (void *)(eth + 1);

	if ((void *)(ip + 1) > end)
		return -1;
	if (*(__u8 *)ip != 0x45)
		return -1;
	__u32 total = bpf_ntohs(ip->tot_len);

	if (total < 20 || (void *)ip + total > end)
		return -1;
	__u8 first = ((__u8 *)&ip->saddr)[0];

	if (first == 0 || first == 127 || first >= 224)
		return -1;
	if (ip->ttl <= 1)
		return -1;
	__u16 *w = (__u16 *)ip;
	__u32 sum = 0;
#pragma unroll
	for (int i = 0; i < 10; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	if (sum != 0xffff)
		return -1;
	__u32 dst = ip->daddr;
	struct fast_nh *nh = fresh(bpf_map_lookup_elem(&fast4, &dst), ctl, total);

	if (!nh)
		return -1;
	// TTL - 1 and the checksum by RFC 1624: the TTL is the high byte of its 16-bit word,
	// so the word drops by 0x0100 and the one's-complement checksum rises by it.
	ip->ttl -= 1;
	__u32 c = (__u32)ip->check + bpf_htons(0x0100);

	ip->check = (__u16)(c + (c >> 16));
	return fast_out(eth, nh);
}

// IPv6 with the checks of ip6_input and classify: payload within the frame, an upper layer
// the pipeline needs no extension-header walk for (TCP, UDP, ICMPv6), a source that is not
// multicast, unspecified, loopback or link-local, hop limit above 1.
static __always_inline int fast6_path(struct ethhdr *eth, void *end, const struct fast_ctl *ctl)
{
	struct ipv6hdr *ip6 = (void *)(eth + 1);

	if ((void *)(ip6 + 1) > end)
		return -1;
	if ((*(__u8 *)ip6 >> 4) != 6)
		return -1;
	__u32 len = 40 + (__u32)bpf_ntohs(ip6->payload_len);

	if ((void *)ip6 + len > end)
		return -1;
	__u8 nx = ip6->nexthdr;

	if (nx != IPPROTO_TCP && nx != IPPROTO_UDP && nx != IPPROTO_ICMPV6)
		return -1;
	// Neighbor discovery and redirects are control traffic whatever their destination.
	if (nx == IPPROTO_ICMPV6) {
		struct icmp6hdr *icmp = (void *)(ip6 + 1);

		if ((void *)(icmp + 1) > end ||
		    (icmp->icmp6_type >= 133 && icmp->icmp6_type <= 137))
			return -1;
	}
	if (ip6->hop_limit <= 1)
		return -1;
	const __u8 *s = ip6->saddr.in6_u.u6_addr8;

	if (s[0] == 0xff || (s[0] == 0xfe && (s[1] & 0xc0) == 0x80))
		return -1;
	__u32 hi = ip6->saddr.in6_u.u6_addr32[0] | ip6->saddr.in6_u.u6_addr32[1] |
		   ip6->saddr.in6_u.u6_addr32[2];
	__u32 lo = bpf_ntohl(ip6->saddr.in6_u.u6_addr32[3]);

	if (hi == 0 && lo <= 1)
		return -1;
	struct addr6 key;

	__builtin_memcpy(key.b, ip6->daddr.in6_u.u6_addr8, 16);
	struct fast_nh *nh = fresh(bpf_map_lookup_elem(&fast6, &key), ctl, len);

	if (!nh)
		return -1;
	ip6->hop_limit -= 1;
	return fast_out(eth, nh);
}

// The fast path's verdict, or -1 when the frame goes to the worker.
static __always_inline int fast_path(void *data, void *end)
{
	__u32 zero = 0;
	struct fast_ctl *ctl = bpf_map_lookup_elem(&fastctl, &zero);
	struct ethhdr *eth = data;

	if (!ctl || !ctl->on || (void *)(eth + 1) > end)
		return -1;
	// Only frames addressed to this port (the pipeline's eth_input rule).
	if (!mac_eq(eth->h_dest, ctl->mac) || (eth->h_source[0] & 1))
		return -1;
	if (eth->h_proto == bpf_htons(ETH_P_IP))
		return fast4_path(eth, end, ctl);
	if (eth->h_proto == bpf_htons(ETH_P_IPV6))
		return fast6_path(eth, end, ctl);
	return -1;
}

SEC("xdp")
int xsk_steer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 q = ctx->rx_queue_index;

	// The fast path goes first: its table holds only destinations the pipeline forwarded,
	// never the router's own addresses, so a hit is transit traffic and the control test
	// (a hash lookup for every IPv4 frame) is saved. Group-addressed frames and ARP never
	// match it (our unicast MAC, IPv4 or IPv6 only).
	int fast = fast_path(data, end);

	if (fast >= 0)
		return fast;
	int syn = 0;
	int cls = control_class(data, end, &syn);

	if (cls != CTL_NONE) {
		int bucket = cls;

		if (cls < POLICED_CLASSES && syn)
			bucket = BUCKET_SYN;
		if (cls < POLICED_CLASSES && !police(bucket)) {
			count(CNT_POLICED_ARP_ND + cls);
			return XDP_DROP;
		}
		return pass_control();
	}
	if (!bpf_map_lookup_elem(&xsks, &q)) {
		count(CNT_XSK_MISSING);
		return XDP_PASS;
	}
	count(CNT_REDIRECTED);
	return bpf_redirect_map(&xsks, q, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
