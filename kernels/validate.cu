// Validation kernels of bisect_smem: is the shared memory of every SM sound, and is it clean when a
// kernel starts? Launched with one block per SM at the opt-in ceiling, so that no two blocks share an SM.
// None of them declares static shared memory: the whole opt-in budget is the dynamic array under test.
//
// smem_march: a march test over the whole dynamic array in 32-bit words. For each pattern P:
//   element 0: ascending, write P       element 1: ascending, read P, write ~P
//   element 2: descending, read ~P, write P      element 3: descending, read P
// with __syncthreads() between elements. Consecutive threads take consecutive words, so every warp
// access touches all 32 banks, and the descending elements give each word to another thread than
// the ascending ones, so no thread only reads back what it wrote. Patterns (mirrored in
// devices/validation_abi.py): 0 all zeros, 1 all ones, 2 checkerboard 0x55555555/0xAAAAAAAA,
// 3 each word's own byte offset, 4..35 walking ones, 36 seeded pseudo-random.
// smem_march_fault (test only) is the same march with one word of one SM corrupted between the first
// write and the first read.
// Result slot of block b, MARCH_SLOT_WORDS words from slots + 8 * b:
//   [0..1] ~key of the first failure (0: none), key = pattern << 34 | element << 32 | word index
//   [2] %smid + 1   [3] reads that were wrong   [4] expected word   [5] word read   [6] reads checked
//   [7] bytes tested
//
// smem_leftover_write / smem_leftover_read: the first fills the dynamic array with words derived from a
// 64-bit nonce and the word index; the second reads the array WITHOUT writing it and counts the words
// that still hold the first's pattern. Result slot of block b, 4 words from slots + 4 * b:
//   [0] %smid + 1   [1] words written or read   [2] words that matched (read only)

#define MARCH_PATTERNS 37u
#define MARCH_WALKING_FIRST 4u
#define MARCH_RANDOM 36u

__device__ __forceinline__ unsigned validate_sm_id() {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    return sm;
}

__device__ __forceinline__ unsigned march_hash(unsigned x) {
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    return x;
}

__device__ __forceinline__ unsigned march_word(unsigned pattern, unsigned i, unsigned seed) {
    if (pattern == 0u) return 0u;
    if (pattern == 1u) return 0xFFFFFFFFu;
    if (pattern == 2u) return (i & 1u) ? 0xAAAAAAAAu : 0x55555555u;
    if (pattern == 3u) return i * 4u;
    if (pattern < MARCH_RANDOM) return 1u << ((i + pattern - MARCH_WALKING_FIRST) & 31u);
    return march_hash(i * 0x9E3779B9u ^ seed);
}

struct MarchFailure {
    unsigned long long key = ~0ull;
    unsigned expected = 0u, got = 0u, bad = 0u, checked = 0u;

    __device__ __forceinline__ void read(volatile unsigned* w, unsigned i, unsigned want, unsigned pattern,
                                         unsigned element) {
        const unsigned v = w[i];
        ++checked;
        if (v == want) return;
        ++bad;
        const unsigned long long k = ((unsigned long long)pattern << 34) | ((unsigned long long)element << 32) | i;
        if (k < key) { key = k; expected = want; got = v; }
    }
};

template <bool FAULT>
__device__ __forceinline__ void march_body(unsigned dynamic_bytes, unsigned seed, unsigned* slots, unsigned fault_sm,
                                           unsigned fault_word, unsigned fault_mask) {
    extern __shared__ unsigned march_smem[];
    volatile unsigned* w = march_smem;
    const unsigned n = dynamic_bytes / 4u;
    unsigned* slot = slots + 8u * blockIdx.x;
    MarchFailure f;
    for (unsigned p = 0; p < MARCH_PATTERNS; ++p) {
        for (unsigned i = threadIdx.x; i < n; i += blockDim.x) w[i] = march_word(p, i, seed);
        __syncthreads();
        if (FAULT && p == 0u) {  // test only: one word of one SM changes between the write and the first read
            if (threadIdx.x == 0 && validate_sm_id() == fault_sm && fault_word < n) w[fault_word] ^= fault_mask;
            __syncthreads();
        }
        for (unsigned i = threadIdx.x; i < n; i += blockDim.x) {
            const unsigned want = march_word(p, i, seed);
            f.read(w, i, want, p, 1u);
            w[i] = ~want;
        }
        __syncthreads();
        for (unsigned j = threadIdx.x; j < n; j += blockDim.x) {
            const unsigned i = n - 1u - j;
            const unsigned want = march_word(p, i, seed);
            f.read(w, i, ~want, p, 2u);
            w[i] = want;
        }
        __syncthreads();
        for (unsigned j = threadIdx.x; j < n; j += blockDim.x) {
            const unsigned i = n - 1u - j;
            f.read(w, i, march_word(p, i, seed), p, 3u);
        }
        __syncthreads();
    }
    unsigned long long* first = reinterpret_cast<unsigned long long*>(slot);
    if (f.bad) {
        atomicMax(first, ~f.key);
        atomicAdd(slot + 3, f.bad);
    }
    atomicAdd(slot + 6, f.checked);
    __syncthreads();
    // The owner of the smallest key, known only after every thread has offered its own, fills in the words.
    if (f.bad && ~*reinterpret_cast<volatile unsigned long long*>(first) == f.key) {
        slot[4] = f.expected;
        slot[5] = f.got;
    }
    if (threadIdx.x == 0) {
        slot[2] = validate_sm_id() + 1u;
        slot[7] = n * 4u;
    }
}

__global__ void smem_march(unsigned dynamic_bytes, unsigned seed, unsigned* slots) {
    march_body<false>(dynamic_bytes, seed, slots, 0u, 0u, 0u);
}

// Test only: the march, except that on SM fault_sm the word fault_word has fault_mask flipped after the
// first pattern is written and before it is read: the run must name that SM, the byte and both words.
template <int UNUSED>  // a template, so that it is compiled only where asked for
__global__ void smem_march_fault(unsigned dynamic_bytes, unsigned seed, unsigned* slots, unsigned fault_sm,
                                 unsigned fault_word, unsigned fault_mask) {
    march_body<true>(dynamic_bytes, seed, slots, fault_sm, fault_word, fault_mask);
}

__device__ __forceinline__ unsigned leftover_word(unsigned long long nonce, unsigned i) {
    unsigned long long z = nonce + (unsigned long long)(i + 1u) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (unsigned)(z ^ (z >> 31));
}

__global__ void smem_leftover_write(unsigned dynamic_bytes, unsigned long long nonce, unsigned* slots) {
    extern __shared__ unsigned leftover_smem[];
    volatile unsigned* w = leftover_smem;
    const unsigned n = dynamic_bytes / 4u;
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) w[i] = leftover_word(nonce, i);
    __syncthreads();
    if (threadIdx.x == 0) {
        slots[4u * blockIdx.x] = validate_sm_id() + 1u;
        slots[4u * blockIdx.x + 1u] = n;
    }
}

__global__ void smem_leftover_read(unsigned dynamic_bytes, unsigned long long nonce, unsigned* slots) {
    extern __shared__ unsigned leftover_smem[];
    volatile unsigned* w = leftover_smem;  // read only: never written, so whatever it holds is leftover
    const unsigned n = dynamic_bytes / 4u;
    unsigned matched = 0u;
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) matched += w[i] == leftover_word(nonce, i);
    atomicAdd(slots + 4u * blockIdx.x + 2u, matched);
    if (threadIdx.x == 0) {
        slots[4u * blockIdx.x] = validate_sm_id() + 1u;
        slots[4u * blockIdx.x + 1u] = n;
    }
}
