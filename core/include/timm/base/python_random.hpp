// Python's random.Random (CPython's _randommodule.c and random.py), for the
// draws timm makes with it: Kron's random.Random(1337) (the kron plugin) and
// webdataset's shard and sample shuffles (the wds/ reader). The Mersenne
// Twister MT19937 seeded by init_by_array with the integer's 32-bit words
// (not std::mt19937's seed_seq), random() from two 32-bit outputs,
// getrandbits(k) for k <= 32 and randint(a, b) by _randbelow (rejection
// sampling on getrandbits).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace timm {

class PyRandom {
 public:
  static constexpr int kN = 624;
  static constexpr int kM = 397;

  // random.Random(seed) for 0 <= seed < 2**64: CPython seeds with the
  // integer's 32-bit words, least significant first (one word below 2**32).
  // A negative Python seed seeds as its absolute value.
  explicit PyRandom(uint64_t seed) {
    const auto high = static_cast<uint32_t>(seed >> 32);
    if (high == 0) {
      init_by_array({static_cast<uint32_t>(seed)});
    } else {
      init_by_array({static_cast<uint32_t>(seed), high});
    }
  }

  // genrand_uint32.
  uint32_t next_uint32() {
    static constexpr uint32_t kMag01[2] = {0x0U, 0x9908b0dfU};
    constexpr uint32_t kUpper = 0x80000000U;
    constexpr uint32_t kLower = 0x7fffffffU;
    uint32_t y = 0;
    if (index_ >= kN) {
      int kk = 0;
      for (; kk < kN - kM; ++kk) {
        y = (mt_[kk] & kUpper) | (mt_[kk + 1] & kLower);
        mt_[kk] = mt_[kk + kM] ^ (y >> 1) ^ kMag01[y & 0x1U];
      }
      for (; kk < kN - 1; ++kk) {
        y = (mt_[kk] & kUpper) | (mt_[kk + 1] & kLower);
        mt_[kk] = mt_[kk + (kM - kN)] ^ (y >> 1) ^ kMag01[y & 0x1U];
      }
      y = (mt_[kN - 1] & kUpper) | (mt_[0] & kLower);
      mt_[kN - 1] = mt_[kM - 1] ^ (y >> 1) ^ kMag01[y & 0x1U];
      index_ = 0;
    }
    y = mt_[index_++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= (y >> 18);
    return y;
  }

  // random.random(): 53 bits, in [0, 1).
  double random() {
    const uint32_t a = next_uint32() >> 5;
    const uint32_t b = next_uint32() >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
  }

  // random.getrandbits(k), 1 <= k <= 32.
  uint32_t getrandbits(int k) {
    if (k < 1 || k > 32) throw std::invalid_argument("PyRandom::getrandbits: k must be in [1, 32]");
    return next_uint32() >> (32 - k);
  }

  // random._randbelow(n) for 1 <= n <= 2**32: k = n.bit_length(), then
  // getrandbits(k) until below n.
  int64_t randbelow(int64_t n) {
    if (n < 1 || n > (int64_t{1} << 32)) throw std::invalid_argument("PyRandom::randbelow: n out of range");
    int k = 0;
    for (int64_t m = n; m != 0; m >>= 1) ++k;
    if (k > 32) k = 32;  // n == 2**32: bit_length 33 needs two words; never asked for here
    int64_t r = getrandbits(k);
    while (r >= n) r = getrandbits(k);
    return r;
  }

  // random.randint(a, b): a + _randbelow(b - a + 1).
  int64_t randint(int64_t a, int64_t b) { return a + randbelow(b - a + 1); }

  // getstate()'s internal state: the 624 words and the index.
  std::vector<int64_t> state() const {
    std::vector<int64_t> out(mt_.begin(), mt_.end());
    out.push_back(index_);
    return out;
  }

  void set_state(const std::vector<int64_t>& state) {
    if (state.size() != kN + 1 || state[kN] < 0 || state[kN] > kN) {
      throw std::invalid_argument("PyRandom::set_state: not a Mersenne Twister state (624 words and an index)");
    }
    for (int i = 0; i < kN; ++i) mt_[i] = static_cast<uint32_t>(state[i]);
    index_ = static_cast<int>(state[kN]);
  }

 private:
  void init_genrand(uint32_t s) {
    mt_[0] = s;
    for (int i = 1; i < kN; ++i) {
      mt_[i] = 1812433253U * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<uint32_t>(i);
    }
    index_ = kN;
  }

  void init_by_array(const std::vector<uint32_t>& key) {
    init_genrand(19650218U);
    int i = 1;
    std::size_t j = 0;
    for (std::size_t k = std::max<std::size_t>(kN, key.size()); k != 0; --k) {
      mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525U)) + key[j] + static_cast<uint32_t>(j);
      ++i;
      ++j;
      if (i >= kN) {
        mt_[0] = mt_[kN - 1];
        i = 1;
      }
      if (j >= key.size()) j = 0;
    }
    for (int k = kN - 1; k != 0; --k) {
      mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941U)) - static_cast<uint32_t>(i);
      ++i;
      if (i >= kN) {
        mt_[0] = mt_[kN - 1];
        i = 1;
      }
    }
    mt_[0] = 0x80000000U;
  }

  std::array<uint32_t, kN> mt_{};
  int index_ = kN;
};

}  // namespace timm
