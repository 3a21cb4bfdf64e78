// The interface between the native snapshot dumper (snapshot_dump.cpp, built
// on first use against the installed torch) and memsight's engine
// (src/snapshot/from_raw.cpp): the allocator's snapshot, symbolized, as flat
// C arrays. No Python object is made on the way from the allocator to the
// pickle; the engine turns these arrays into its model and writes torch's
// snapshot pickle from it. docs/formats.md describes the layout.
//
//   strings   string_offsets[n_strings+1] into string_bytes; id 0 is ""
//   frames    {name, filename: string ids; line}
//   stacks    stack_offsets[n_stacks+1] into stack_frames (frame ids,
//             innermost first, as torch stores them); stack 0 is empty
//   segments  each owns blocks [block_begin, block_end)
//   entries   device d owns entries [device_offsets[d], device_offsets[d+1])
//   annotations  each owns (key, value) string-id pairs
//                annotation_kv[2*kv_begin .. 2*kv_end)
#pragma once

#include <stdint.h>

#define MEMSIGHT_RAW_SNAPSHOT_ABI 1

#ifdef __cplusplus
extern "C" {
#endif

struct msr_frame {
  uint32_t name, filename;
  int64_t line;
};

// has_context: torch recorded a stack (the "frames" key is filled after
// symbolization, so for a segment it follows "blocks"); without one, a
// segment or block gets "frames": [] in place and an entry no "frames".
struct msr_segment {
  int64_t device, address, total_size, allocated_size, active_size, requested_size, stream;
  uint64_t pool_id[2];
  uint32_t stack, block_begin, block_end;
  uint8_t is_large, is_expandable, has_context, reserved;
};

enum { MSR_ACTIVE_ALLOCATED = 0, MSR_ACTIVE_PENDING_FREE = 1, MSR_INACTIVE = 2 };

struct msr_block {
  int64_t size, requested_size;
  uint32_t stack;
  uint8_t state, has_context, reserved[2];
};

// action: torch's TraceEntry::Action (alloc 0, free_requested 1,
// free_completed 2, segment_alloc 3, segment_free 4, segment_map 5,
// segment_unmap 6, snapshot 7, oom 8); for oom, addr is the device's free bytes.
struct msr_entry {
  int64_t addr, size, stream, time_us;
  uint32_t stack, compile_context, user_metadata;
  uint8_t action, has_context, reserved[2];
};

struct msr_annotation {
  int64_t device, time_us;
  uint32_t kv_begin, kv_end;
};

struct msr_settings {
  uint32_t alloc_conf;  // PYTORCH_CUDA_ALLOC_CONF as torch last parsed it (string id)
  uint32_t n_divisions;
  const int64_t* divisions;  // roundup_power2_divisions, for 1, 2, 4, ... MiB
  double garbage_collection_threshold;
  int64_t max_split_size;  // -1: unlimited
  int64_t pinned_num_register_threads;
  uint8_t expandable_segments, release_lock_on_cudamalloc, pinned_use_cuda_host_register,
      graph_capture_record_stream_reuse;
};

struct memsight_raw_snapshot {
  int32_t abi;  // MEMSIGHT_RAW_SNAPSHOT_ABI
  uint32_t n_strings;
  const uint64_t* string_offsets;
  const char* string_bytes;
  uint32_t n_frames;
  const struct msr_frame* frames;
  uint32_t n_stacks;
  const uint32_t* stack_offsets;
  const uint32_t* stack_frames;
  uint32_t n_segments, n_blocks;
  const struct msr_segment* segments;
  const struct msr_block* blocks;
  uint32_t n_devices;
  const uint64_t* device_offsets;
  const struct msr_entry* entries;
  uint32_t n_annotations;
  const struct msr_annotation* annotations;
  const uint32_t* annotation_kv;
  struct msr_settings settings;
  // Which keys this torch writes: its trace entries' compile_context and
  // user_metadata, the top-level external_annotations, and the setting
  // graph_capture_record_stream_reuse (older releases lack them).
  uint8_t has_compile_context, has_user_metadata, has_annotations,
      has_graph_capture_record_stream_reuse;
  // Where the dump's time went, in seconds: the allocator's copy of its state
  // (under its lock), finding the unique stacks, symbolizing them, the arrays.
  double seconds_state, seconds_gather, seconds_symbolize, seconds_arrays;
};

#ifdef __cplusplus
}
#endif
