# The engine as WebAssembly, for the standalone viewer (`memsight viewer`):
# the native engine's own src/ files plus src/wasm/engine.cpp, with Debian's
# zlib, zstd and liblzma sources (scripts/wasm_deps.sh) compiled alongside.
# Included by CMakeLists.txt when it runs under emscripten's toolchain
# (the native build does that by itself when emcc is installed).
#
# Output: memsight_engine.js (emscripten's loader, MODULARIZE'd as
# MemsightEngine) and memsight_engine.wasm.
enable_language(C)

set(MEMSIGHT_WASM_DEPS "${CMAKE_SOURCE_DIR}/build/wasm-deps" CACHE PATH
    "Unpacked Debian sources of zlib, libzstd and xz-utils (scripts/wasm_deps.sh)")
set(D ${MEMSIGHT_WASM_DEPS})
foreach(dir zlib libzstd/lib xz-utils/src/liblzma)
  if(NOT EXISTS ${D}/${dir})
    message(FATAL_ERROR "${D}/${dir} is missing: run scripts/wasm_deps.sh")
  endif()
endforeach()

set(WASM_OPT -O2)
add_compile_options(${WASM_OPT} -fwasm-exceptions)
add_link_options(${WASM_OPT} -fwasm-exceptions)

# zlib: what the engine calls (inflate for .gz input, deflate for the writer).
set(ZLIB_FILES adler32 crc32 deflate inffast inflate inftrees trees zutil)
list(TRANSFORM ZLIB_FILES PREPEND ${D}/zlib/)
list(TRANSFORM ZLIB_FILES APPEND .c)
add_library(wasm_zlib STATIC ${ZLIB_FILES})
target_include_directories(wasm_zlib PUBLIC ${D}/zlib)
target_compile_options(wasm_zlib PRIVATE -w)

# zstd: the library without its x86 assembly, threads or legacy formats.
file(GLOB ZSTD_FILES ${D}/libzstd/lib/common/*.c ${D}/libzstd/lib/compress/*.c
     ${D}/libzstd/lib/decompress/*.c)
add_library(wasm_zstd STATIC ${ZSTD_FILES})
target_include_directories(wasm_zstd PUBLIC ${D}/libzstd/lib)
target_compile_definitions(wasm_zstd PRIVATE ZSTD_DISABLE_ASM ZSTD_LEGACY_SUPPORT=0)
target_compile_options(wasm_zstd PRIVATE -w)

# liblzma: the .xz stream decoder with every check and filter xz writes.
set(L ${D}/xz-utils/src/liblzma)
set(LZMA_FILES
  check/check.c check/crc32_fast.c check/crc32_table.c check/crc64_fast.c
  check/crc64_table.c check/sha256.c
  common/alone_decoder.c common/auto_decoder.c common/block_decoder.c
  common/block_header_decoder.c common/block_util.c common/common.c
  common/easy_preset.c common/filter_common.c common/filter_decoder.c
  common/filter_flags_decoder.c common/index.c common/index_hash.c
  common/stream_decoder.c common/stream_flags_common.c common/stream_flags_decoder.c
  common/vli_decoder.c common/vli_size.c
  delta/delta_common.c delta/delta_decoder.c
  lz/lz_decoder.c
  lzma/lzma_decoder.c lzma/lzma2_decoder.c lzma/lzma_encoder_presets.c
  rangecoder/price_table.c
  simple/simple_coder.c simple/simple_decoder.c simple/arm.c simple/arm64.c
  simple/armthumb.c simple/ia64.c simple/powerpc.c simple/sparc.c simple/x86.c)
list(TRANSFORM LZMA_FILES PREPEND ${L}/)
add_library(wasm_lzma STATIC ${LZMA_FILES})
target_include_directories(wasm_lzma PUBLIC ${L}/api
  PRIVATE ${L}/common ${L}/check ${L}/delta ${L}/lz ${L}/lzma ${L}/rangecoder ${L}/simple
          ${D}/xz-utils/src/common)
target_compile_definitions(wasm_lzma PRIVATE
  HAVE_CHECK_CRC32 HAVE_CHECK_CRC64 HAVE_CHECK_SHA256 HAVE_DECODERS HAVE_DECODER_LZMA1
  HAVE_DECODER_LZMA2 HAVE_DECODER_DELTA HAVE_DECODER_X86 HAVE_DECODER_ARM HAVE_DECODER_ARM64
  HAVE_DECODER_ARMTHUMB HAVE_DECODER_IA64 HAVE_DECODER_POWERPC HAVE_DECODER_SPARC
  HAVE_STDBOOL_H HAVE__BOOL HAVE_STDINT_H HAVE_INTTYPES_H TUKLIB_SYMBOL_PREFIX=lzma_)
target_compile_options(wasm_lzma PRIVATE -w)

# The engine: the native build's sources (cmake/engine_sources.cmake) and
# src/wasm's entry points, less the writers that pour the embedded viewer
# files into a page (the standalone page already is one).
include(${CMAKE_SOURCE_DIR}/cmake/engine_sources.cmake)
file(GLOB WASM_ENTRY_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/wasm/*.cpp)
set(ENGINE_WASM_SOURCES ${MEMSIGHT_ENGINE_SOURCES} ${WASM_ENTRY_SOURCES})
list(REMOVE_ITEM ENGINE_WASM_SOURCES ${CMAKE_SOURCE_DIR}/src/report/html.cpp
     ${CMAKE_SOURCE_DIR}/src/report/bundle.cpp ${CMAKE_SOURCE_DIR}/src/report/standalone.cpp
     ${CMAKE_SOURCE_DIR}/src/report/profile_page.cpp)
add_executable(memsight_engine ${ENGINE_WASM_SOURCES})
set_target_properties(memsight_engine PROPERTIES SUFFIX ".js")
target_include_directories(memsight_engine PRIVATE include ${MEMSIGHT_ENGINE_INCLUDES})
target_compile_definitions(memsight_engine PRIVATE MEMSIGHT_HAVE_LZMA=1)
target_link_libraries(memsight_engine PRIVATE wasm_zlib wasm_zstd wasm_lzma)
target_link_options(memsight_engine PRIVATE
  -sMODULARIZE=1 -sEXPORT_NAME=MemsightEngine -sENVIRONMENT=worker,node
  -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB -sINITIAL_MEMORY=32MB
  -sFILESYSTEM=0 -sEXIT_RUNTIME=0 --no-entry
  "-sEXPORTED_FUNCTIONS=['_memsight_open','_memsight_result','_memsight_result_size','_memsight_release']"
  "-sEXPORTED_RUNTIME_METHODS=['stringToUTF8','lengthBytesUTF8','UTF8ToString']")
# emcc's JavaScript passes need the acorn module, which Debian installs for
# its own Node.js only (/usr/share/nodejs); point any other node at it.
find_path(MEMSIGHT_ACORN_DIR acorn/package.json PATHS /usr/share/nodejs /usr/lib/nodejs
          NO_CMAKE_FIND_ROOT_PATH)
if(MEMSIGHT_ACORN_DIR)
  set_target_properties(memsight_engine PROPERTIES
    CXX_LINKER_LAUNCHER "${CMAKE_COMMAND};-E;env;NODE_PATH=${MEMSIGHT_ACORN_DIR}")
endif()
