// PostgreSQL's client library (Debian's libpq-dev, PostgreSQL 15): the cluster's log and registry.
#include <libpq-fe.h>
