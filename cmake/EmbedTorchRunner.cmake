# Embeds tools/torch_runner.py (the PyTorch side of agtrace: the differential test imports
# it, `agtrace export --torch` prints it inside the scripts it writes) into agtrace_lib, so
# the file stays the one source of truth and the binary needs no file at run time.
#
# At configure time the file is read and written into a generated C++ source, as one raw
# string literal (R"AGTRACE_PY(...)AGTRACE_PY"); configure fails if the delimiter ever
# appears in the Python text. The Python file is a configure dependency, so editing it
# re-runs CMake (and so regenerates the source) at the next build; configure_file only
# rewrites the generated file when its content changes.
set(AGTRACE_TORCH_RUNNER_PY ${CMAKE_SOURCE_DIR}/tools/torch_runner.py)
set_property(DIRECTORY ${CMAKE_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${AGTRACE_TORCH_RUNNER_PY})
file(READ ${AGTRACE_TORCH_RUNNER_PY} AGTRACE_TORCH_RUNNER_SOURCE)
string(FIND "${AGTRACE_TORCH_RUNNER_SOURCE}" ")AGTRACE_PY\"" _agtrace_delim_at)
if(NOT _agtrace_delim_at EQUAL -1)
  message(FATAL_ERROR "${AGTRACE_TORCH_RUNNER_PY} contains the raw-string delimiter )AGTRACE_PY\" "
                      "used to embed it; change the delimiter in cmake/torch_runner_source.cpp.in")
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/torch_runner_source.cpp.in
               ${CMAKE_BINARY_DIR}/generated/torch_runner_source.cpp @ONLY)
target_sources(agtrace_lib PRIVATE ${CMAKE_BINARY_DIR}/generated/torch_runner_source.cpp)
