import ArgumentParser
import HTTP1
import Logging
import Reactor
import Server
import Synchronization
import CShims
#if canImport(Glibc)
import Glibc
#endif

// Blocks of 128 KiB and more (the buffers of large dictionaries and arrays, which are replaced
// whole when they grow) are mapped and unmapped by themselves. glibc would otherwise raise this
// threshold after the first such block is freed and carve later ones from the heap, where each
// freed buffer stays resident as a hole: seen as about a tenth of the memory 10,000 sessions hold.
_ = cshims_set_mmap_threshold(128 * 1024)

RoomcastCommand.main()
