#pragma once
// What merge_ranks says of the files themselves, before any number is
// compared: what does not match across them (torch versions, devices,
// rounds, world sizes), whether they look like one job at all (world sizes,
// job ids, one host's local rank twice, recordings hours apart), and the
// ranks they hold.
#include <cstdint>
#include <vector>

#include "memsight/ranks.h"

namespace memsight {

// The note of a report of one rank: nothing to compare.
inline constexpr const char* kOneRank =
    "one rank given: one file is one rank, so there is nothing to compare it with; give the "
    "files of every rank (a folder, a glob such as 'run/oom_1_rank*.pickle', or the round's "
    "manifest)";

// Recordings further apart than this (with no overlap) are not one job's.
inline constexpr int64_t kApartUs = int64_t{10} * 60 * 1'000'000;

// Fills rep.mismatches, and rep.world_size where the files agree on one.
void name_mismatches(RanksReport& rep);

// The ranks' numbers, ascending (rep.ranks is sorted by rank).
std::vector<int64_t> rank_numbers(const RanksReport& rep);

}  // namespace memsight
