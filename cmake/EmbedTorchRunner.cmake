# Embeds tools/torch_runner.py (the PyTorch side of agtrace: the differential test imports
# it, `agtrace export --torch` prints it inside the scripts it writes) into agtrace_lib, so
# the file stays the one source of truth and the binary needs no file at run time.
include(${CMAKE_SOURCE_DIR}/cmake/EmbedPython.cmake)
agtrace_embed_python(${CMAKE_SOURCE_DIR}/tools/torch_runner.py ${CMAKE_SOURCE_DIR}/cmake/torch_runner_source.cpp.in
                     AGTRACE_TORCH_RUNNER_SOURCE agtrace_lib)
