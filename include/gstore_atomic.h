/* SPDX-License-Identifier: MIT */
/*
 * gstore atomics: the ordering primitives of the ring code that runs on CPU
 * threads and in CUDA kernels alike (gstore_ring.h, gstore_nvmeq.h,
 * gstore_cuda_cam.h, gstore_cuda_bam.h).  One definition of each, static
 * inline, __host__ __device__ under nvcc: GCC __atomic builtins on the CPU,
 * libcu++ cuda::atomic_ref on the GPU, at one of two scopes:
 *
 *   gs_*     system scope: memory that other processes, the host's pollers
 *            or a device also use (rings, NVMe queues, completion words);
 *   gs_d_*   device scope: producer-local memory (GPU memory for kernels),
 *   gs_d32_* which only the GPU's own threads touch.
 *
 * On the CPU both scopes are the same instruction.  Orders are in the names
 * (acq, rel, rlx); fetch-add and the weak CAS of system scope are relaxed.
 * Also the common ground of those headers: GS_HD, GS_STATIC_ASSERT,
 * GS_CACHELINE, GS_ZERO.
 */
#ifndef GSTORE_ATOMIC_H
#define GSTORE_ATOMIC_H

#include <stdint.h>

#if defined(__CUDACC__)
#define GS_HD static inline __host__ __device__
#else
#define GS_HD static inline
#endif

#ifdef __cplusplus
#define GS_STATIC_ASSERT static_assert
#else
#define GS_STATIC_ASSERT _Static_assert
#endif

#define GS_CACHELINE	64

/* An all-zero initializer that both C and C++ (-Wextra) take without a warning. */
#ifdef __cplusplus
#define GS_ZERO {}
#else
#define GS_ZERO { 0 }
#endif

#if defined(__CUDA_ARCH__)
#include <cuda/atomic>
#else
#include <sched.h>
#endif

#if defined(__CUDA_ARCH__)
/* ---- GPU, system scope ---- */
#define GS_AREF(T, p) cuda::atomic_ref<T, cuda::thread_scope_system>(*(p))
GS_HD uint64_t gs_load_acq64(uint64_t *p)
{
	return GS_AREF(uint64_t, p).load(cuda::memory_order_acquire);
}

GS_HD uint64_t gs_load_rlx64(uint64_t *p)
{
	return GS_AREF(uint64_t, p).load(cuda::memory_order_relaxed);
}

GS_HD void gs_store_rel64(uint64_t *p, uint64_t v)
{
	GS_AREF(uint64_t, p).store(v, cuda::memory_order_release);
}

GS_HD uint64_t gs_faa64(uint64_t *p, uint64_t v)
{
	return GS_AREF(uint64_t, p).fetch_add(v, cuda::memory_order_relaxed);
}

GS_HD int gs_cas64(uint64_t *p, uint64_t *exp, uint64_t des)
{
	return GS_AREF(uint64_t, p).compare_exchange_weak(*exp, des, cuda::memory_order_relaxed);
}

GS_HD uint32_t gs_load_acq32(uint32_t *p)
{
	return GS_AREF(uint32_t, p).load(cuda::memory_order_acquire);
}

GS_HD uint32_t gs_load_rlx32(uint32_t *p)
{
	return GS_AREF(uint32_t, p).load(cuda::memory_order_relaxed);
}

GS_HD void gs_store_rel32(uint32_t *p, uint32_t v)
{
	GS_AREF(uint32_t, p).store(v, cuda::memory_order_release);
}

GS_HD void gs_store_rlx32(uint32_t *p, uint32_t v)
{
	GS_AREF(uint32_t, p).store(v, cuda::memory_order_relaxed);
}

/* Loads whose order comes from a gs_fence_acq() after them (a batch of them
 * in flight at once, one fence for the batch). */
GS_HD uint32_t gs_load_fenced32(uint32_t *p)
{
	return gs_load_rlx32(p);
}

GS_HD uint64_t gs_load_fenced64(uint64_t *p)
{
	return gs_load_rlx64(p);
}

GS_HD void gs_fence(void)
{
	cuda::atomic_thread_fence(cuda::memory_order_seq_cst, cuda::thread_scope_system);
}

GS_HD void gs_fence_acq(void)
{
	cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_system);
}

/* A lock word of system scope: 1 when taken (acquire); release with gs_store_rel64(l, 0). */
GS_HD int gs_trylock64(uint64_t *l)
{
	uint64_t e = 0;

	/* test before test-and-set: many waiting lanes read, one CASes */
	if (GS_AREF(uint64_t, l).load(cuda::memory_order_relaxed))
		return 0;
	return GS_AREF(uint64_t, l).compare_exchange_strong(e, 1, cuda::memory_order_acquire);
}

/* A store to device registers (an NVMe doorbell) after every queue entry,
 * ours and those seen through acquires, is visible system-wide. */
GS_HD void gs_store_mmio32(uint32_t *db, uint32_t v)
{
	__threadfence_system();
	*(volatile uint32_t *)db = v;
}

GS_HD void gs_cpu_relax(void)
{
	__nanosleep(64);
}

GS_HD void gs_spin_backoff(unsigned *n)
{
	(void)n; __nanosleep(64);
}

/* ---- GPU, device scope ---- */
#define GS_DREF(T, p) cuda::atomic_ref<T, cuda::thread_scope_device>(*(p))
GS_HD uint64_t gs_d_load_acq(uint64_t *p)
{
	return GS_DREF(uint64_t, p).load(cuda::memory_order_acquire);
}

GS_HD uint64_t gs_d_load_rlx(uint64_t *p)
{
	return GS_DREF(uint64_t, p).load(cuda::memory_order_relaxed);
}

GS_HD void gs_d_store_rel(uint64_t *p, uint64_t v)
{
	GS_DREF(uint64_t, p).store(v, cuda::memory_order_release);
}

GS_HD void gs_d_store_rlx(uint64_t *p, uint64_t v)
{
	GS_DREF(uint64_t, p).store(v, cuda::memory_order_relaxed);
}

GS_HD uint64_t gs_d_faa(uint64_t *p, uint64_t v)
{
	return GS_DREF(uint64_t, p).fetch_add(v, cuda::memory_order_relaxed);
}

GS_HD int gs_d_cas(uint64_t *p, uint64_t *exp, uint64_t des)
{
	return GS_DREF(uint64_t, p).compare_exchange_strong(*exp, des, cuda::memory_order_acq_rel,
							     cuda::memory_order_acquire);
}

GS_HD int gs_d_cas_i64(int64_t *p, int64_t exp, int64_t des)
{
	return GS_DREF(int64_t, p).compare_exchange_strong(exp, des, cuda::memory_order_relaxed);
}

GS_HD uint64_t gs_d_max(uint64_t *p, uint64_t v)
{
	return GS_DREF(uint64_t, p).fetch_max(v, cuda::memory_order_relaxed);
}

GS_HD uint32_t gs_d32_load_acq(uint32_t *p)
{
	return GS_DREF(uint32_t, p).load(cuda::memory_order_acquire);
}

GS_HD uint32_t gs_d32_load_rlx(uint32_t *p)
{
	return GS_DREF(uint32_t, p).load(cuda::memory_order_relaxed);
}

GS_HD void gs_d32_store_rlx(uint32_t *p, uint32_t v)
{
	GS_DREF(uint32_t, p).store(v, cuda::memory_order_relaxed);
}

GS_HD uint32_t gs_d32_faa_acq(uint32_t *p, uint32_t v)
{
	return GS_DREF(uint32_t, p).fetch_add(v, cuda::memory_order_acquire);
}

GS_HD uint32_t gs_d32_faa_rel(uint32_t *p, uint32_t v)
{
	return GS_DREF(uint32_t, p).fetch_add(v, cuda::memory_order_release);
}

GS_HD uint32_t gs_d32_faa_acq_rel(uint32_t *p, uint32_t v)
{
	return GS_DREF(uint32_t, p).fetch_add(v, cuda::memory_order_acq_rel);
}

GS_HD uint32_t gs_d32_or(uint32_t *p, uint32_t v)
{
	return GS_DREF(uint32_t, p).fetch_or(v, cuda::memory_order_relaxed);
}

GS_HD uint32_t gs_d32_and(uint32_t *p, uint32_t v)
{
	return GS_DREF(uint32_t, p).fetch_and(v, cuda::memory_order_relaxed);
}

GS_HD int gs_d32_cas(uint32_t *p, uint32_t exp, uint32_t des)
{
	return GS_DREF(uint32_t, p).compare_exchange_strong(exp, des, cuda::memory_order_acq_rel,
							     cuda::memory_order_relaxed);
}

GS_HD int gs_d_trylock(uint64_t *l)
{
	uint64_t e = 0;

	/* test before test-and-set: thousands of waiting warps read the line
	 * instead of queueing atomics on it while the holder works */
	if (GS_DREF(uint64_t, l).load(cuda::memory_order_relaxed))
		return 0;
	return GS_DREF(uint64_t, l).compare_exchange_strong(e, 1, cuda::memory_order_acquire,
							     cuda::memory_order_relaxed);
}

/* Back off in a wait loop: nanosleep, doubling up to 2 us (thousands of waiters). */
GS_HD void gs_d_backoff(uint32_t *ns)
{
	__nanosleep(*ns);
	if (*ns < 2048)
		*ns *= 2;
}

#else /* the CPU */

/* ---- CPU: one scope ---- */
GS_HD uint64_t gs_load_acq64(uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

GS_HD uint64_t gs_load_rlx64(uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

GS_HD void gs_store_rel64(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

GS_HD uint64_t gs_faa64(uint64_t *p, uint64_t v)
{
	return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

GS_HD int gs_cas64(uint64_t *p, uint64_t *exp, uint64_t des)
{
	return __atomic_compare_exchange_n(p, exp, des, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

GS_HD uint32_t gs_load_acq32(uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

GS_HD uint32_t gs_load_rlx32(uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

GS_HD void gs_store_rel32(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

GS_HD void gs_store_rlx32(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}
#if defined(__SANITIZE_THREAD__)
/*
 * TSan does not model fences (and gcc rejects them): a seq_cst RMW is a full
 * barrier on x86 and keeps TSan's view of the atomics exact; the loads that
 * an acquire fence would order are acquires themselves, and the fence is
 * nothing.
 */
GS_HD void gs_fence(void)
{
	static int dummy;

	__atomic_fetch_add(&dummy, 0, __ATOMIC_SEQ_CST);
}

GS_HD uint32_t gs_load_fenced32(uint32_t *p)
{
	return gs_load_acq32(p);
}

GS_HD uint64_t gs_load_fenced64(uint64_t *p)
{
	return gs_load_acq64(p);
}

GS_HD void gs_fence_acq(void) { }
#else
GS_HD void gs_fence(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* Loads whose order comes from a gs_fence_acq() after them (a batch of them
 * in flight at once, one fence for the batch). */
GS_HD uint32_t gs_load_fenced32(uint32_t *p)
{
	return gs_load_rlx32(p);
}

GS_HD uint64_t gs_load_fenced64(uint64_t *p)
{
	return gs_load_rlx64(p);
}

GS_HD void gs_fence_acq(void)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
}
#endif
/* A lock word: 1 when taken (acquire); release with gs_store_rel64(l, 0). */
GS_HD int gs_trylock64(uint64_t *l)
{
	uint64_t e = 0;

	return __atomic_compare_exchange_n(l, &e, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

/* A store to device registers (an NVMe doorbell): full fence first, so that
 * queue entries written by any thread (seen through our acquires) are
 * globally visible before the device is told. */
GS_HD void gs_store_mmio32(uint32_t *db, uint32_t v)
{
	gs_fence();
	__atomic_store_n(db, v, __ATOMIC_RELEASE);
}

GS_HD void gs_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Spin-wait step: pause, and give the CPU away now and then in case the
 * thread we wait for is not running (more threads than cores). */
GS_HD void gs_spin_backoff(unsigned *n)
{
	if (++*n % 256)
		gs_cpu_relax();
	else
		sched_yield();
}

/* Device scope is system scope on the CPU. */
GS_HD uint64_t gs_d_load_acq(uint64_t *p)
{
	return gs_load_acq64(p);
}

GS_HD uint64_t gs_d_load_rlx(uint64_t *p)
{
	return gs_load_rlx64(p);
}

GS_HD void gs_d_store_rel(uint64_t *p, uint64_t v)
{
	gs_store_rel64(p, v);
}

GS_HD void gs_d_store_rlx(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

GS_HD uint64_t gs_d_faa(uint64_t *p, uint64_t v)
{
	return gs_faa64(p, v);
}

GS_HD int gs_d_cas(uint64_t *p, uint64_t *exp, uint64_t des)
{
	return __atomic_compare_exchange_n(p, exp, des, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

GS_HD int gs_d_cas_i64(int64_t *p, int64_t exp, int64_t des)
{
	return __atomic_compare_exchange_n(p, &exp, des, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

GS_HD uint64_t gs_d_max(uint64_t *p, uint64_t v)
{
	uint64_t o = __atomic_load_n(p, __ATOMIC_RELAXED);

	while (o < v &&
	       !__atomic_compare_exchange_n(p, &o, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	return o;
}

GS_HD uint32_t gs_d32_load_acq(uint32_t *p)
{
	return gs_load_acq32(p);
}

GS_HD uint32_t gs_d32_load_rlx(uint32_t *p)
{
	return gs_load_rlx32(p);
}

GS_HD void gs_d32_store_rlx(uint32_t *p, uint32_t v)
{
	gs_store_rlx32(p, v);
}

GS_HD uint32_t gs_d32_faa_acq(uint32_t *p, uint32_t v)
{
	return __atomic_fetch_add(p, v, __ATOMIC_ACQUIRE);
}

GS_HD uint32_t gs_d32_faa_rel(uint32_t *p, uint32_t v)
{
	return __atomic_fetch_add(p, v, __ATOMIC_RELEASE);
}

GS_HD uint32_t gs_d32_faa_acq_rel(uint32_t *p, uint32_t v)
{
	return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
}

GS_HD uint32_t gs_d32_or(uint32_t *p, uint32_t v)
{
	return __atomic_fetch_or(p, v, __ATOMIC_RELAXED);
}

GS_HD uint32_t gs_d32_and(uint32_t *p, uint32_t v)
{
	return __atomic_fetch_and(p, v, __ATOMIC_RELAXED);
}

GS_HD int gs_d32_cas(uint32_t *p, uint32_t exp, uint32_t des)
{
	return __atomic_compare_exchange_n(p, &exp, des, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

GS_HD int gs_d_trylock(uint64_t *l)
{
	return gs_trylock64(l);
}

/* Back off in a wait loop.  CPU threads (tests) share few cores with the
 * pollers: yield soon. */
GS_HD void gs_d_backoff(uint32_t *ns)
{
	if (*ns < 4096) {
		*ns += 256;
		gs_cpu_relax();
	} else {
		sched_yield();
	}
}
#endif /* __CUDA_ARCH__ */

#endif /* GSTORE_ATOMIC_H */
