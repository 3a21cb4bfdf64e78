// The rooms of the unmapped ranges, for find_expandable_block: torch takes
// the first unmapped block (by stream, then address) from which, starting at
// its free mapped predecessor if it has one, free and unmapped blocks add up
// to the request. Within one run of such blocks the first unmapped block
// starts at or before every later one and sees all they see, so it is the
// only one of its run that can be chosen: it carries the room from its
// start to the run's end, every other unmapped block of the run none (-1),
// and the search is the index's first range of enough room. A change to a
// block only changes the runs through it or beside it; those are measured
// again, each once, before the next search.
#include "allocator/caching_allocator.h"

namespace memsight::alloc {

uint32_t CachingAllocator::first_unmapped_with_room(uint16_t pool, uint16_t stream, int64_t size) {
  refresh_rooms();
  uint32_t u = pools[pool].unmapped.first_with_room(stream, size);
  return u == UnmappedIndex::kNil ? kNone : u;
}

void CachingAllocator::refresh_rooms() {
  if (room_dirty_.empty()) return;
  if (room_seen_.size() < blocks.size()) room_seen_.resize(blocks.size(), 0);
  ++room_pass_;
  for (uint32_t b : room_dirty_) {
    const Block& x = blocks[b];
    if (!x.used || !x.va) continue;  // gone: whoever took its place was noted too
    if (allocatable(b)) {
      measure_run(b);
    } else {  // it may have cut a run in two
      if (allocatable(x.prev)) measure_run(x.prev);
      if (allocatable(x.next)) measure_run(x.next);
    }
  }
  room_dirty_.clear();
}

// Sets the rooms of the unmapped blocks in the run of free and unmapped
// blocks through b (b allocatable).
void CachingAllocator::measure_run(uint32_t b) {
  if (room_seen_[b] == room_pass_) return;
  uint32_t s = b;
  while (allocatable(blocks[s].prev)) s = blocks[s].prev;
  uint32_t first = kNone;
  int64_t room = 0;
  for (uint32_t x = s; allocatable(x); x = blocks[x].next) {
    room_seen_[x] = room_pass_;
    const Block& k = blocks[x];
    if (!k.mapped) {
      if (first == kNone) {
        first = x;
        if (allocatable(k.prev)) room = blocks[k.prev].size;
      } else {
        pools[k.pool].unmapped.set_room(unmapped_node_[x], -1);
      }
    }
    if (first != kNone) room += k.size;
  }
  if (first != kNone) pools[blocks[first].pool].unmapped.set_room(unmapped_node_[first], room);
}

}  // namespace memsight::alloc
