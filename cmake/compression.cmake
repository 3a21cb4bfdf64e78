# zlib, zstd and liblzma compiled from Debian's sources (scripts/wasm_deps.sh
# unpacks them into MEMSIGHT_WASM_DEPS): the WebAssembly engine always links
# these, and a wheel links them too (MEMSIGHT_BUNDLED_COMPRESSION), so that
# the installed module needs no compression library of the user's system.
# Only what the engine calls is compiled: inflate and deflate, the whole of
# zstd without its assembly, threads or legacy formats, and the .xz decoder
# with every check and filter xz writes (and, natively, the encoder).
#
# memsight_compression_libs(PREFIX DIR [XZ_ENCODER]) defines PREFIX_zlib,
# PREFIX_zstd and PREFIX_lzma, static libraries whose include directories are
# public. XZ_ENCODER adds the .xz encoder (`convert -o x.xz`), which the
# native engine calls and the WebAssembly one does not.
function(memsight_compression_libs prefix D)
  cmake_parse_arguments(ARG "XZ_ENCODER" "" "" ${ARGN})
  foreach(dir zlib libzstd/lib xz-utils/src/liblzma)
    if(NOT EXISTS ${D}/${dir})
      message(FATAL_ERROR "${D}/${dir} is missing: run scripts/wasm_deps.sh")
    endif()
  endforeach()

  set(ZLIB_FILES adler32 crc32 deflate inffast inflate inftrees trees zutil)
  list(TRANSFORM ZLIB_FILES PREPEND ${D}/zlib/)
  list(TRANSFORM ZLIB_FILES APPEND .c)
  add_library(${prefix}_zlib STATIC ${ZLIB_FILES})
  target_include_directories(${prefix}_zlib PUBLIC ${D}/zlib)

  file(GLOB ZSTD_FILES ${D}/libzstd/lib/common/*.c ${D}/libzstd/lib/compress/*.c
       ${D}/libzstd/lib/decompress/*.c)
  add_library(${prefix}_zstd STATIC ${ZSTD_FILES})
  target_include_directories(${prefix}_zstd PUBLIC ${D}/libzstd/lib)
  target_compile_definitions(${prefix}_zstd PRIVATE ZSTD_DISABLE_ASM ZSTD_LEGACY_SUPPORT=0)

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
  set(LZMA_DEFINES HAVE_DECODERS HAVE_DECODER_LZMA1 HAVE_DECODER_LZMA2 HAVE_DECODER_DELTA
      HAVE_DECODER_X86 HAVE_DECODER_ARM HAVE_DECODER_ARM64 HAVE_DECODER_ARMTHUMB HAVE_DECODER_IA64
      HAVE_DECODER_POWERPC HAVE_DECODER_SPARC)
  if(ARG_XZ_ENCODER)
    # What lzma_easy_buffer_encode reaches: the .xz stream of LZMA2 blocks.
    list(APPEND LZMA_FILES
      common/block_buffer_encoder.c common/block_encoder.c common/block_header_encoder.c
      common/easy_buffer_encoder.c common/filter_encoder.c common/filter_flags_encoder.c
      common/index_encoder.c common/stream_buffer_encoder.c common/stream_flags_encoder.c
      common/vli_encoder.c lz/lz_encoder.c lz/lz_encoder_mf.c lzma/lzma_encoder.c
      lzma/lzma2_encoder.c lzma/lzma_encoder_optimum_fast.c lzma/lzma_encoder_optimum_normal.c
      lzma/fastpos_table.c delta/delta_encoder.c simple/simple_encoder.c)
    list(APPEND LZMA_DEFINES HAVE_ENCODERS HAVE_ENCODER_LZMA1 HAVE_ENCODER_LZMA2
      HAVE_ENCODER_DELTA HAVE_ENCODER_X86 HAVE_ENCODER_ARM HAVE_ENCODER_ARM64
      HAVE_ENCODER_ARMTHUMB HAVE_ENCODER_IA64 HAVE_ENCODER_POWERPC HAVE_ENCODER_SPARC
      HAVE_MF_HC3 HAVE_MF_HC4 HAVE_MF_BT2 HAVE_MF_BT3 HAVE_MF_BT4)
  endif()
  list(TRANSFORM LZMA_FILES PREPEND ${L}/)
  add_library(${prefix}_lzma STATIC ${LZMA_FILES})
  target_include_directories(${prefix}_lzma PUBLIC ${L}/api
    PRIVATE ${L}/common ${L}/check ${L}/delta ${L}/lz ${L}/lzma ${L}/rangecoder ${L}/simple
            ${D}/xz-utils/src/common)
  target_compile_definitions(${prefix}_lzma PRIVATE ${LZMA_DEFINES}
    HAVE_CHECK_CRC32 HAVE_CHECK_CRC64 HAVE_CHECK_SHA256
    HAVE_STDBOOL_H HAVE__BOOL HAVE_STDINT_H HAVE_INTTYPES_H TUKLIB_SYMBOL_PREFIX=lzma_)
  foreach(lib zlib zstd lzma)
    # Foreign code: its warnings are not ours to fix. Hidden, so that the
    # module exports none of it and never clashes with a copy torch loads.
    target_compile_options(${prefix}_${lib} PRIVATE -w)
    set_target_properties(${prefix}_${lib} PROPERTIES C_VISIBILITY_PRESET hidden
                          POSITION_INDEPENDENT_CODE ON)
  endforeach()
endfunction()
