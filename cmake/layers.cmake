# One static library per layer of the engine, linked in layer order
# (cmake/engine_sources.cmake lists them, lowest first). A layer compiles
# against its own folder and the layers below it, and nothing else: each
# gets an include root under <build>/layers/NAME holding links to its
# src/NAME folder and to its public headers (include/memsight), so an
# `#include "analysis/..."` in src/allocator, or of an analysis' public
# header there, is a missing file and the build stops.

# The public headers of each layer.
set(MEMSIGHT_HEADERS_util error.h)
set(MEMSIGHT_HEADERS_input io.h input_limits.h)
set(MEMSIGHT_HEADERS_model snapshot.h pyvalue.h trace_fields.h id_slots.h)
set(MEMSIGHT_HEADERS_pickle "")
set(MEMSIGHT_HEADERS_snapshot reader.h from_raw.h holders.h)
set(MEMSIGHT_HEADERS_allocator "")
set(MEMSIGHT_HEADERS_analysis frames.h label.h categories.h text_tools.h summary.h diff.h
    leaks.h ranks.h whatif.h estimate.h)
set(MEMSIGHT_HEADERS_profile profile.h)
set(MEMSIGHT_HEADERS_report flamegraph.h html.h)
set(MEMSIGHT_HEADERS_cli cli.h)

# Every header of include/memsight belongs to one layer.
file(GLOB _public RELATIVE ${CMAKE_SOURCE_DIR}/include/memsight CONFIGURE_DEPENDS
     ${CMAKE_SOURCE_DIR}/include/memsight/*.h)
foreach(h ${_public})
  set(_owner "")
  foreach(layer ${MEMSIGHT_LAYERS} cli)
    if(h IN_LIST MEMSIGHT_HEADERS_${layer})
      set(_owner ${layer})
    endif()
  endforeach()
  if(NOT _owner)
    message(FATAL_ERROR "include/memsight/${h} belongs to no layer: add it to cmake/layers.cmake")
  endif()
endforeach()

# memsight_layer(NAME [BELOW] [SOURCES...]): the library memsight_NAME of
# src/NAME's sources (and SOURCES), on top of memsight_BELOW.
function(memsight_layer name below)
  set(root ${CMAKE_BINARY_DIR}/layers/${name})
  file(REMOVE_RECURSE ${root})
  file(MAKE_DIRECTORY ${root}/memsight)
  file(CREATE_LINK ${CMAKE_SOURCE_DIR}/src/${name} ${root}/${name} SYMBOLIC)
  foreach(h ${MEMSIGHT_HEADERS_${name}})
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/include/memsight/${h} ${root}/memsight/${h} SYMBOLIC)
  endforeach()
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${name}/*.cpp)
  add_library(memsight_${name} STATIC ${sources} ${ARGN})
  target_include_directories(memsight_${name} PUBLIC ${root})
  if(below)
    target_link_libraries(memsight_${name} PUBLIC memsight_${below})
  endif()
endfunction()
