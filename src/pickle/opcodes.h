#pragma once
// Pickle opcodes (protocols 0-5) and little-endian loads, shared by the
// unpickler and the trace walkers.
#include <cstdint>
#include <cstring>

namespace memsight::pickle_op {

enum Op : uint8_t {
  MARK = '(',
  STOP = '.',
  POP = '0',
  POP_MARK = '1',
  DUP = '2',
  FLOAT = 'F',
  INT = 'I',
  BININT = 'J',
  BININT1 = 'K',
  LONG = 'L',
  BININT2 = 'M',
  NONE = 'N',
  PERSID = 'P',
  BINPERSID = 'Q',
  REDUCE = 'R',
  STRING = 'S',
  BINSTRING = 'T',
  SHORT_BINSTRING = 'U',
  UNICODE = 'V',
  BINUNICODE = 'X',
  APPEND = 'a',
  BUILD = 'b',
  GLOBAL = 'c',
  DICT = 'd',
  EMPTY_DICT = '}',
  APPENDS = 'e',
  GET = 'g',
  BINGET = 'h',
  INST = 'i',
  LONG_BINGET = 'j',
  LIST = 'l',
  EMPTY_LIST = ']',
  OBJ = 'o',
  PUT = 'p',
  BINPUT = 'q',
  LONG_BINPUT = 'r',
  SETITEM = 's',
  TUPLE = 't',
  EMPTY_TUPLE = ')',
  SETITEMS = 'u',
  BINFLOAT = 'G',
  PROTO = 0x80,
  NEWOBJ = 0x81,
  EXT1 = 0x82,
  EXT2 = 0x83,
  EXT4 = 0x84,
  TUPLE1 = 0x85,
  TUPLE2 = 0x86,
  TUPLE3 = 0x87,
  NEWTRUE = 0x88,
  NEWFALSE = 0x89,
  LONG1 = 0x8a,
  LONG4 = 0x8b,
  BINBYTES = 'B',
  SHORT_BINBYTES = 'C',
  SHORT_BINUNICODE = 0x8c,
  BINUNICODE8 = 0x8d,
  BINBYTES8 = 0x8e,
  EMPTY_SET = 0x8f,
  ADDITEMS = 0x90,
  FROZENSET = 0x91,
  NEWOBJ_EX = 0x92,
  STACK_GLOBAL = 0x93,
  MEMOIZE = 0x94,
  FRAME = 0x95,
  BYTEARRAY8 = 0x96,
  NEXT_BUFFER = 0x97,
  READONLY_BUFFER = 0x98,
};

template <typename T>
inline T load_le(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;  // x86-64 and arm64 Linux are little-endian, as pickle is
}

// Whether the FRAME at q declares no more bytes than follow it before `end`.
// pickle.loads refuses one that declares more (truncated): the helpers that
// step over frame headers stop at such a one and leave it to the main
// thread, which checks every frame's end at STOP.
inline bool frame_fits(const uint8_t* q, const uint8_t* end) {
  return end - q >= 9 && load_le<uint64_t>(q + 1) <= static_cast<uint64_t>(end - q - 9);
}

// LONG1's payload when it fits in 8 bytes: n little-endian bytes, two's
// complement. Reads 8 bytes, so the caller guarantees they are there.
inline int64_t long1_value(const uint8_t* b, size_t n) {
  uint64_t u;
  std::memcpy(&u, b, 8);
  if (n < 8) {
    u &= (uint64_t{1} << (8 * n)) - 1;
    if (b[n - 1] & 0x80) u |= ~uint64_t{0} << (8 * n);
  }
  return static_cast<int64_t>(u);
}

// A small int at q: BININT1, BININT2, BININT, or a LONG1 of 1-8 bytes whose
// value fits the unpickler's 60-bit ints (a bigger one is kept as a big int
// by the generic path). Sets `out` and moves q past it; false for anything
// else. Reads up to 10 bytes from q.
inline bool small_int(const uint8_t*& q, int64_t& out) {
  switch (*q) {
    case BININT1:
      out = q[1];
      q += 2;
      return true;
    case BININT2:
      out = load_le<uint16_t>(q + 1);
      q += 3;
      return true;
    case BININT:
      out = load_le<int32_t>(q + 1);
      q += 5;
      return true;
    case LONG1: {
      size_t n = q[1];
      if (n == 0 || n > 8) return false;
      int64_t v = long1_value(q + 2, n);
      if (v < -(int64_t{1} << 59) || v >= (int64_t{1} << 59)) return false;
      out = v;
      q += 2 + n;
      return true;
    }
    default:
      return false;
  }
}

// The bytes of the key at one position of a trace entry. Entries repeat
// their keys byte for byte (the same memo reads), so a decoder remembers,
// per position, the last key's bytes and what they meant.
struct KeySlot {
  uint64_t bytes = 0, mask = 0;
  uint8_t len = 0;  // 0: nothing remembered
  uint8_t field = 0;
  uint32_t key = 0;
  // The same bytes at q (8 readable): the key and field, q moved past them.
  bool hit(const uint8_t*& q, uint32_t& k, uint8_t& f) const {
    uint64_t raw;
    std::memcpy(&raw, q, 8);
    if (!len || (raw & mask) != bytes) return false;
    k = key;
    f = field;
    q += len;
    return true;
  }
  // Remembers the key read from [start, end), if it was a short memo read.
  void remember(const uint8_t* start, const uint8_t* end, uint32_t k, uint8_t f) {
    auto n = static_cast<size_t>(end - start);
    len = 0;
    if ((*start != BINGET && *start != LONG_BINGET) || n > 8) return;
    uint64_t raw;
    std::memcpy(&raw, start, 8);
    mask = n == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * n)) - 1;
    bytes = raw & mask;
    len = static_cast<uint8_t>(n);
    key = k;
    field = f;
  }
};

// Throws the Error for an opcode the reader does not run (refused_opcodes.cpp):
// one that would run code, one no snapshot uses, or an unknown byte.
[[noreturn]] void refuse_opcode(uint8_t op, uint64_t offset);

}  // namespace memsight::pickle_op
