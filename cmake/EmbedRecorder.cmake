# Embeds tools/record/agtrace_record.py (the recorder `agtrace record` runs) into the agtrace
# executable, so an installed agtrace records models without the source tree.
include(${CMAKE_SOURCE_DIR}/cmake/EmbedPython.cmake)
agtrace_embed_python(${CMAKE_SOURCE_DIR}/tools/record/agtrace_record.py ${CMAKE_SOURCE_DIR}/cmake/recorder_source.cpp.in
                     AGTRACE_RECORDER_SOURCE agtrace)
