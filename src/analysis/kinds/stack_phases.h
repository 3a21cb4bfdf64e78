#pragma once
// The phase a stack says an allocation was made in (classify.h, rule 3):
// found once per stack, from bits found once per frame string.
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/kinds/classify.h"
#include "util/id_cache.h"

namespace memsight {

class StackPhases {
 public:
  // `work`: the device's trace entries (util/id_cache.h).
  StackPhases(const Snapshot& snap, size_t work);

  // The phase of stack s (not 0; Unknown for an empty stack), whether it
  // accumulates a gradient (AccumulateGrad, with C++ stacks) and the kind
  // a library frame names. Asked once per allocation, so the cached answer
  // is read inline.
  struct Found {
    Phase phase;
    bool accumulate;
    KindHint hint;
  };
  Found of(StackId s) {
    uint8_t& c = stacks_[s];
    if (c == kNotYet) c = find(s);
    return {static_cast<Phase>(c & 0x0f), (c & 0x80) != 0, static_cast<KindHint>((c >> 4) & 0x7)};
  }

 private:
  static constexpr uint8_t kNotYet = 0xff;
  uint8_t find(StackId s);  // phase | hint << 4 | 0x80 for AccumulateGrad
  uint8_t bits(IdCache<uint8_t>& cache, StrId s, uint8_t (*of)(std::string_view));

  const Snapshot& snap_;
  IdCache<uint8_t> stacks_;  // per stack: find()'s answer; kNotYet: not yet
  // Per string, its bits of the frame rules (bit 7: found), made on first use.
  IdCache<uint8_t> file_bits_, name_bits_;
};

}  // namespace memsight
