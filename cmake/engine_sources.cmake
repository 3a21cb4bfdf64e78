# The engine's sources and include folders: one list for the native library
# (CMakeLists.txt) and the standalone viewer's WebAssembly (cmake/wasm.cmake),
# so that both builds compile the same engine.
file(GLOB MEMSIGHT_ENGINE_SOURCES CONFIGURE_DEPENDS
  ${CMAKE_SOURCE_DIR}/src/pickle/*.cpp ${CMAKE_SOURCE_DIR}/src/profile/*.cpp
  ${CMAKE_SOURCE_DIR}/src/snapshot/*.cpp ${CMAKE_SOURCE_DIR}/src/analysis/*.cpp
  ${CMAKE_SOURCE_DIR}/src/report/*.cpp ${CMAKE_SOURCE_DIR}/src/capture/*.cpp
  ${CMAKE_SOURCE_DIR}/src/util/*.cpp)
# python/memsight/torch/native: the C layout the native snapshot dumper hands over.
set(MEMSIGHT_ENGINE_INCLUDES ${CMAKE_SOURCE_DIR}/src
    ${CMAKE_SOURCE_DIR}/python/memsight/torch/native)
