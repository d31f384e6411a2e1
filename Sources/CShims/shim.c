#define _GNU_SOURCE
#include <sys/socket.h>
#include "CShims.h"

int cshims_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags) {
    return accept4(fd, addr, len, flags);
}

#include <pthread.h>
int cshims_set_thread_name(const char *name) {
    return pthread_setname_np(pthread_self(), name);
}

#include <malloc.h>
int cshims_set_mmap_threshold(int bytes) {
    return mallopt(M_MMAP_THRESHOLD, bytes);
}

int cshims_set_arena_max(int n) {
    return mallopt(M_ARENA_MAX, n);
}

int cshims_trim_heap(void) {
    return malloc_trim(0);
}

#include <sys/ioctl.h>
#include <linux/sockios.h>
int cshims_unsent_bytes(int fd) {
    int n = 0;
    return ioctl(fd, SIOCOUTQ, &n) == 0 ? n : -1;
}
