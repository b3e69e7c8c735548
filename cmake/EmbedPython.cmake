# agtrace_embed_python(PY TEMPLATE VAR TARGET): reads the Python file PY at configure time
# into the variable VAR, writes TEMPLATE (a .cpp.in holding @VAR@ inside one raw string
# literal, R"AGTRACE_PY(...)AGTRACE_PY") to generated/<TEMPLATE's name without .in> and adds
# it to TARGET. Configure fails if the delimiter ever appears in the Python text. PY is a
# configure dependency, so editing it re-runs CMake at the next build; configure_file only
# rewrites the generated file when its content changes.
function(agtrace_embed_python py template var target)
  set_property(DIRECTORY ${CMAKE_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${py})
  file(READ ${py} ${var})
  string(FIND "${${var}}" ")AGTRACE_PY\"" delim_at)
  if(NOT delim_at EQUAL -1)
    message(FATAL_ERROR "${py} contains the raw-string delimiter )AGTRACE_PY\" used to embed it; "
                        "change the delimiter in ${template}")
  endif()
  get_filename_component(generated ${template} NAME_WLE)
  configure_file(${template} ${CMAKE_BINARY_DIR}/generated/${generated} @ONLY)
  target_sources(${target} PRIVATE ${CMAKE_BINARY_DIR}/generated/${generated})
endfunction()
