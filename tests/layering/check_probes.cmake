# cmake -DBUILD_DIR=<build> -DCONFIG=<cfg> -DSOURCE_DIR=<source> \
#       -DPROBES="<target>|<upward header>,..." -P check_probes.cmake
# Succeeds only when no layer's file includes a path with "..", and every probe's build fails
# on its upward header.
file(GLOB_RECURSE layer_files ${SOURCE_DIR}/src/*/*.cpp ${SOURCE_DIR}/src/*/*.hpp
     ${SOURCE_DIR}/include/trellis/*.hpp)
foreach(path IN LISTS layer_files)
  file(STRINGS ${path} escapes REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<][^\">]*\\.\\.")
  if(escapes)
    message(FATAL_ERROR "${path}: ${escapes}: an include path with \"..\" can reach a layer above "
                        "(include by \"trellis/<layer>/...\" or by a name in the same folder)")
  endif()
endforeach()
string(REPLACE "," ";" PROBES "${PROBES}")
foreach(probe IN LISTS PROBES)
  string(REPLACE "|" ";" probe "${probe}")
  list(GET probe 0 target)
  list(GET probe 1 header)
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${target} --config ${CONFIG}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc EQUAL 0)
    message(FATAL_ERROR "${target} compiled: its layer can include ${header}, a header of a "
                        "layer above it (see cmake/TrellisLayers.cmake)")
  endif()
  string(REPLACE "." "\\." header_regex "${header}")
  if(NOT out MATCHES "${header_regex}'?:? *(No such file|file not found)")
    message(FATAL_ERROR "${target} failed, but not on the upward include of ${header}:\n${out}")
  endif()
  message(STATUS "${target}: ${header} not found, as required")
endforeach()
list(LENGTH PROBES count)
message(STATUS "layering: ${count} upward includes refused")
