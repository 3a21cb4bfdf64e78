# ctest `layering`: the layers' include roots let each layer see only itself
# and the layers below (cmake/layers.cmake). For every layer: its public
# headers compile with its own roots, and an include of the layer from one
# layer below it (the nearest arrow that runs back up) is a missing file.
# Run as: cmake -DCXX=... -DBUILD=<build dir> -DSOURCE=<source dir>
#         "-DLAYERS=util;input;..." -P check_layering.cmake
string(REPLACE "|" ";" LAYERS "${LAYERS}")
set(probe_dir ${BUILD}/layering_probe)
file(MAKE_DIRECTORY ${probe_dir})
set(roots "")
set(previous "")
foreach(layer ${LAYERS})
  set(below_roots ${roots})
  list(APPEND roots -I${BUILD}/layers/${layer})
  # Every header of the layer's own folder, then its public ones.
  file(GLOB headers RELATIVE ${SOURCE}/src ${SOURCE}/src/${layer}/*.h
       ${SOURCE}/src/${layer}/*/*.h)
  file(GLOB public RELATIVE ${BUILD}/layers/${layer} ${BUILD}/layers/${layer}/memsight/*.h)
  set(text "")
  foreach(h ${headers} ${public})
    string(APPEND text "#include \"${h}\"\n")
  endforeach()
  if(text STREQUAL "")
    continue()
  endif()
  file(WRITE ${probe_dir}/${layer}.cpp "${text}")
  execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only ${roots} ${probe_dir}/${layer}.cpp
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${layer}: its headers do not compile on its own include roots:\n${err}")
  endif()
  if(previous)
    set(own ${headers} ${public})
    list(GET own 0 first)
    file(WRITE ${probe_dir}/${previous}_up.cpp "#include \"${first}\"\n")
    execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only ${below_roots}
                            ${probe_dir}/${previous}_up.cpp
                    RESULT_VARIABLE rc ERROR_VARIABLE err)
    if(rc EQUAL 0 OR NOT err MATCHES "No such file")
      message(FATAL_ERROR "${previous} can include ${first}, a header of the layer above it")
    endif()
  endif()
  set(previous ${layer})
endforeach()
message(STATUS "layering: ${LAYERS}: each sees only itself and the layers below")
