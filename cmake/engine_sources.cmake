# The engine's layers, lowest first, and their sources: one list for the
# native libraries (cmake/layers.cmake) and the standalone viewer's
# WebAssembly (cmake/wasm.cmake), so that both builds compile the same engine.
set(MEMSIGHT_LAYERS util input model pickle snapshot allocator analysis profile report)
set(MEMSIGHT_ENGINE_SOURCES "")
foreach(layer ${MEMSIGHT_LAYERS})
  file(GLOB_RECURSE MEMSIGHT_${layer}_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${layer}/*.cpp)
  list(APPEND MEMSIGHT_ENGINE_SOURCES ${MEMSIGHT_${layer}_SOURCES})
endforeach()
# python/memsight/torch/native: the C layout the native snapshot dumper hands over.
set(MEMSIGHT_ENGINE_INCLUDES ${CMAKE_SOURCE_DIR}/src
    ${CMAKE_SOURCE_DIR}/python/memsight/torch/native)
