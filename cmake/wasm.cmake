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

set(WASM_OPT -O2)
add_compile_options(${WASM_OPT} -fwasm-exceptions)
add_link_options(${WASM_OPT} -fwasm-exceptions)

include(${CMAKE_SOURCE_DIR}/cmake/compression.cmake)
memsight_compression_libs(wasm ${MEMSIGHT_WASM_DEPS})

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
