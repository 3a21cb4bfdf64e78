// Opcodes the reader does not run, refused with their name: those that
// would import or call Python code, and those of pickles no snapshot is.
#include <cstdio>
#include <string>

#include "memsight/error.h"
#include "pickle/opcodes.h"

namespace memsight::pickle_op {
namespace {

const char* code_opcode_name(uint8_t op) {
  switch (op) {
    case GLOBAL:
      return "GLOBAL";
    case STACK_GLOBAL:
      return "STACK_GLOBAL";
    case REDUCE:
      return "REDUCE";
    case BUILD:
      return "BUILD";
    case INST:
      return "INST";
    case OBJ:
      return "OBJ";
    case NEWOBJ:
      return "NEWOBJ";
    case NEWOBJ_EX:
      return "NEWOBJ_EX";
    case EXT1:
      return "EXT1";
    case EXT2:
      return "EXT2";
    case EXT4:
      return "EXT4";
    case PERSID:
      return "PERSID";
    case BINPERSID:
      return "BINPERSID";
    default:
      return nullptr;
  }
}

const char* other_opcode_name(uint8_t op) {
  switch (op) {
    case FLOAT:
      return "FLOAT";
    case INT:
      return "INT";
    case LONG:
      return "LONG";
    case STRING:
      return "STRING";
    case BINSTRING:
      return "BINSTRING";
    case SHORT_BINSTRING:
      return "SHORT_BINSTRING";
    case UNICODE:
      return "UNICODE";
    case GET:
      return "GET";
    case PUT:
      return "PUT";
    case EMPTY_SET:
      return "EMPTY_SET";
    case ADDITEMS:
      return "ADDITEMS";
    case FROZENSET:
      return "FROZENSET";
    case NEXT_BUFFER:
      return "NEXT_BUFFER";
    case READONLY_BUFFER:
      return "READONLY_BUFFER";
    default:
      return nullptr;
  }
}

}  // namespace

void refuse_opcode(uint8_t op, uint64_t offset) {
  if (const char* name = code_opcode_name(op))
    throw Error("refusing to run code: pickle opcode " + std::string(name) + " at byte " +
                std::to_string(offset) +
                " would import or call a Python object; a memory snapshot holds only "
                "plain data");
  if (const char* name = other_opcode_name(op))
    throw Error("unsupported pickle opcode " + std::string(name) + " at byte " +
                std::to_string(offset) +
                " (not used by memory snapshots, which torch writes with protocol 2+)");
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%02x", op);
  throw Error("corrupted pickle at byte " + std::to_string(offset) + ": unknown opcode " + buf);
}

}  // namespace memsight::pickle_op
