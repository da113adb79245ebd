/*
 * Thin C layer between vfsr-bench and DPDK 22.11 (LPM, FIB, FIB6, EAL).
 *
 * It exists for three reasons: rte_lpm's lookups are static inline functions
 * (nothing to link against), rte_errno is a per-lcore macro, and the FIB
 * configuration structs hold anonymous unions that are easier to fill in C
 * than to mirror in Rust. Everything else is called from Rust directly.
 */
#include <rte_config.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <rte_cpuflags.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_fib.h>
#include <rte_fib6.h>
#include <rte_lpm.h>
#include <rte_vect.h>

/* Batch size handed to rte_lpm_lookup_bulk: the header asks for a compile-time
 * constant divisible by 8; it also sizes a variable-length array on the stack. */
#define VFSR_LPM_BATCH 64

int vfsr_rte_errno(void)
{
	return rte_errno;
}

const char *vfsr_rte_strerror(int err)
{
	return rte_strerror(err);
}

/* 1 when the CPU has the instructions DPDK's AVX-512 FIB lookups need
 * (F, DQ and, for the IPv6 trie, BW). */
int vfsr_cpu_has_avx512(int need_bw)
{
	if (rte_cpu_get_flag_enabled(RTE_CPUFLAG_AVX512F) <= 0)
		return 0;
	if (rte_cpu_get_flag_enabled(RTE_CPUFLAG_AVX512DQ) <= 0)
		return 0;
	if (need_bw && rte_cpu_get_flag_enabled(RTE_CPUFLAG_AVX512BW) <= 0)
		return 0;
	return 1;
}

int vfsr_set_max_simd_bitwidth(uint16_t bits)
{
	return rte_vect_set_max_simd_bitwidth(bits);
}

uint16_t vfsr_get_max_simd_bitwidth(void)
{
	return rte_vect_get_max_simd_bitwidth();
}

/* ---- rte_lpm (IPv4) ---------------------------------------------------- */

struct rte_lpm *vfsr_lpm_create(const char *name, uint32_t max_rules,
				uint32_t number_tbl8s)
{
	struct rte_lpm_config cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.max_rules = max_rules;
	cfg.number_tbl8s = number_tbl8s;
	cfg.flags = 0;
	return rte_lpm_create(name, SOCKET_ID_ANY, &cfg);
}

/* Looks up n host-order addresses; writes the next hop, or 0 on a miss. */
void vfsr_lpm_lookup_bulk(const struct rte_lpm *lpm, const uint32_t *ips,
			  uint32_t *out, size_t n)
{
	size_t i = 0;
	size_t j;

	while (n - i >= VFSR_LPM_BATCH) {
		rte_lpm_lookup_bulk(lpm, ips + i, out + i, VFSR_LPM_BATCH);
		i += VFSR_LPM_BATCH;
	}
	if (i < n)
		rte_lpm_lookup_bulk(lpm, ips + i, out + i, (unsigned)(n - i));
	for (j = 0; j < n; j++)
		out[j] = (out[j] & RTE_LPM_LOOKUP_SUCCESS) ?
			(out[j] & 0x00FFFFFF) : 0;
}

/* ---- rte_fib (IPv4, DIR24_8) ------------------------------------------- */

/* nh_bytes is 1, 2, 4 or 8; the default next hop (returned on a miss) is 0. */
struct rte_fib *vfsr_fib_create(const char *name, int max_routes,
				uint32_t num_tbl8, unsigned nh_bytes)
{
	struct rte_fib_conf conf;

	memset(&conf, 0, sizeof(conf));
	conf.type = RTE_FIB_DIR24_8;
	conf.default_nh = 0;
	conf.max_routes = max_routes;
	conf.rib_ext_sz = 0;
	switch (nh_bytes) {
	case 1:
		conf.dir24_8.nh_sz = RTE_FIB_DIR24_8_1B;
		break;
	case 2:
		conf.dir24_8.nh_sz = RTE_FIB_DIR24_8_2B;
		break;
	case 4:
		conf.dir24_8.nh_sz = RTE_FIB_DIR24_8_4B;
		break;
	case 8:
		conf.dir24_8.nh_sz = RTE_FIB_DIR24_8_8B;
		break;
	default:
		rte_errno = EINVAL;
		return NULL;
	}
	conf.dir24_8.num_tbl8 = num_tbl8;
	return rte_fib_create(name, SOCKET_ID_ANY, &conf);
}

/* 0 = the scalar lookup DPDK uses when no vector unit may be used,
 * 1 = the AVX-512 lookup. Returns DPDK's status (negative on failure). */
int vfsr_fib_select(struct rte_fib *fib, int avx512)
{
	return rte_fib_select_lookup(fib, avx512 ?
		RTE_FIB_LOOKUP_DIR24_8_VECTOR_AVX512 :
		RTE_FIB_LOOKUP_DIR24_8_SCALAR_MACRO);
}

/* ---- rte_fib6 (IPv6, TRIE) --------------------------------------------- */

/* nh_bytes is 2, 4 or 8; the default next hop is 0. */
struct rte_fib6 *vfsr_fib6_create(const char *name, int max_routes,
				  uint32_t num_tbl8, unsigned nh_bytes)
{
	struct rte_fib6_conf conf;

	memset(&conf, 0, sizeof(conf));
	conf.type = RTE_FIB6_TRIE;
	conf.default_nh = 0;
	conf.max_routes = max_routes;
	conf.rib_ext_sz = 0;
	switch (nh_bytes) {
	case 2:
		conf.trie.nh_sz = RTE_FIB6_TRIE_2B;
		break;
	case 4:
		conf.trie.nh_sz = RTE_FIB6_TRIE_4B;
		break;
	case 8:
		conf.trie.nh_sz = RTE_FIB6_TRIE_8B;
		break;
	default:
		rte_errno = EINVAL;
		return NULL;
	}
	conf.trie.num_tbl8 = num_tbl8;
	return rte_fib6_create(name, SOCKET_ID_ANY, &conf);
}

int vfsr_fib6_select(struct rte_fib6 *fib, int avx512)
{
	return rte_fib6_select_lookup(fib, avx512 ?
		RTE_FIB6_LOOKUP_TRIE_VECTOR_AVX512 :
		RTE_FIB6_LOOKUP_TRIE_SCALAR);
}
