import ArgumentParser
import HTTP1
import Logging
import Reactor
import Server
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

RoomcastCommand.main()
