// TIMM_AVX2_CLONES: compiles the function it marks twice, for AVX2 and for
// baseline x86-64, and picks one when the library loads by what the CPU has
// (GCC's target_clones, an ifunc). For element-wise loops that vectorise 8
// floats wide where the CPU allows it, without building the whole project
// for one CPU. Empty elsewhere.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#define TIMM_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TIMM_AVX2_CLONES
#endif
