# Embeds tools/record/agtrace_record.py (the recorder `agtrace record` runs) into the agtrace
# executable, so an installed agtrace records models without the source tree. Same scheme
# as EmbedTorchRunner.cmake: read at configure time into a generated C++ source as one raw
# string literal; the Python file is a configure dependency, so an edit regenerates it.
set(AGTRACE_RECORDER_PY ${CMAKE_SOURCE_DIR}/tools/record/agtrace_record.py)
set_property(DIRECTORY ${CMAKE_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${AGTRACE_RECORDER_PY})
file(READ ${AGTRACE_RECORDER_PY} AGTRACE_RECORDER_SOURCE)
string(FIND "${AGTRACE_RECORDER_SOURCE}" ")AGTRACE_PY\"" _agtrace_recorder_delim_at)
if(NOT _agtrace_recorder_delim_at EQUAL -1)
  message(FATAL_ERROR "${AGTRACE_RECORDER_PY} contains the raw-string delimiter )AGTRACE_PY\" "
                      "used to embed it; change the delimiter in cmake/recorder_source.cpp.in")
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/recorder_source.cpp.in
               ${CMAKE_BINARY_DIR}/generated/recorder_source.cpp @ONLY)
target_sources(agtrace PRIVATE ${CMAKE_BINARY_DIR}/generated/recorder_source.cpp)
