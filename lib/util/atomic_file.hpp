// Writes a file so that a reader never sees it half written: a temporary file in the
// same folder, flushed and fsync'ed, then renamed over the target (rename is atomic on
// one filesystem). An interrupted run leaves the old file intact. Only a regular file or a
// new path is replaced so: a device, FIFO or terminal is written through (as `cat > path`
// does), a symlink is followed (the file it names is replaced, the link stays), and a
// folder is an error.
#pragma once
#include <string>

namespace agtrace {

// Throws InputError (kind "io") naming the path when any step fails; the temporary file
// is removed on failure.
void write_file_atomic(const std::string& path, const std::string& content);

std::string read_file(const std::string& path);

}  // namespace agtrace
