// curl_easy_setopt and friends are variadic: typed wrappers make them importable.
#include <curl/curl.h>
static inline CURLcode ccurl_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_ptr(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_str(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
typedef size_t (*ccurl_data_cb)(char *ptr, size_t size, size_t nmemb, void *userdata);
static inline CURLcode ccurl_easy_setopt_write_cb(CURL *h, ccurl_data_cb cb) { return curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cb); }
static inline CURLcode ccurl_easy_setopt_header_cb(CURL *h, ccurl_data_cb cb) { return curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, cb); }
static inline CURLcode ccurl_easy_getinfo_long(CURL *h, CURLINFO i, long *out) { return curl_easy_getinfo(h, i, out); }
static inline CURLcode ccurl_easy_getinfo_double(CURL *h, CURLINFO i, double *out) { return curl_easy_getinfo(h, i, out); }
static inline CURLcode ccurl_easy_getinfo_ptr(CURL *h, CURLINFO i, void **out) { return curl_easy_getinfo(h, i, out); }
static inline CURLMcode ccurl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
typedef curl_socket_t (*ccurl_opensocket_cb)(void *clientp, curlsocktype purpose, struct curl_sockaddr *address);
static inline CURLcode ccurl_easy_setopt_opensocket_cb(CURL *h, ccurl_opensocket_cb cb) { return curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, cb); }
typedef int (*ccurl_prereq_cb)(void *clientp, char *conn_primary_ip, char *conn_local_ip, int conn_primary_port, int conn_local_port);
static inline CURLcode ccurl_easy_setopt_prereq_cb(CURL *h, ccurl_prereq_cb cb) { return curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, cb); }
