// Linux interfaces that Swift's Glibc module does not export (see SWIFT-NOTES.md §2):
// epoll, eventfd, timerfd and accept4 (the last sits behind _GNU_SOURCE).
#ifndef ROOMCAST_CSHIMS_H
#define ROOMCAST_CSHIMS_H

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

int cshims_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);
int cshims_set_thread_name(const char *name);
/// mallopt(M_MMAP_THRESHOLD, bytes): a fixed threshold (glibc stops adjusting it). 1 on success.
int cshims_set_mmap_threshold(int bytes);
/// mallopt(M_ARENA_MAX, n): at most n malloc arenas for all threads. 1 on success.
int cshims_set_arena_max(int n);
/// malloc_trim(0): gives the free pages of every malloc arena back to the system. 1 if any were.
int cshims_trim_heap(void);
/// ioctl(fd, SIOCOUTQ): bytes in a TCP socket's send queue the peer has not acknowledged, or -1.
int cshims_unsent_bytes(int fd);

#endif
