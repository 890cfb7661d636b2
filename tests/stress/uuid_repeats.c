/* uuid_repeats.c - LD_PRELOAD shim for libgearman clients: counts the
 * unique ids libgearman generates that repeat one it generated before.
 *
 * libgearman 1.1.20 gives every job without a unique a time-based UUID from
 * uuid_generate_time_safe(). Without uuidd and without a writable
 * /var/lib/libuuid/clock.txt, libuuid keeps the clock sequence per thread,
 * chosen at random (14 bits), so two client threads can hand out the same
 * UUID in the same microsecond. A Gearman server coalesces two foreground
 * jobs with the same unique, and one client then receives the other job's
 * result. This shim tells such runs apart from a server fault: at exit it
 * prints to stderr
 *     uuid_repeats: generated=N repeated=R forced=F
 * UUID_REPEAT_EVERY=K makes every K-th call hand out the UUID of the call
 * before it (whichever thread made it), to show what a repeat does.
 *
 *   cc -O2 -shared -fPIC -o uuid_repeats.so uuid_repeats.c -ldl -lpthread
 *   LD_PRELOAD=./uuid_repeats.so gearload rt ...
 *
 * Used by tests/stress/results.sh (UNIQUES=libgearman).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned char uuid16[16];

#define MAX_KEPT (1L << 23) /* 8 Mi UUIDs, 128 MiB at most */

static int (*next_generate)(uuid16);
static uuid16 *kept;
static long made, forced, every;
static uuid16 previous;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

__attribute__((constructor)) static void setup(void)
{
  next_generate = (int (*)(uuid16))dlsym(RTLD_NEXT, "uuid_generate_time_safe");
  const char *e = getenv("UUID_REPEAT_EVERY");
  every = e ? atol(e) : 0;
}

int uuid_generate_time_safe(uuid16 out)
{
  int rc = next_generate ? next_generate(out) : -1;
  pthread_mutex_lock(&lock);
  if (!kept) kept = calloc(MAX_KEPT, sizeof *kept);
  if (every > 0 && made > 0 && made % every == 0) {
    memcpy(out, previous, sizeof previous);
    forced++;
  }
  memcpy(previous, out, sizeof previous);
  if (kept && made < MAX_KEPT) memcpy(kept[made], out, sizeof *kept);
  made++;
  pthread_mutex_unlock(&lock);
  return rc;
}

static int order(const void *a, const void *b) { return memcmp(a, b, sizeof(uuid16)); }

__attribute__((destructor)) static void report(void)
{
  long n = made < MAX_KEPT ? made : MAX_KEPT, repeated = 0;
  if (kept) {
    qsort(kept, (size_t)n, sizeof *kept, order);
    for (long i = 1; i < n; i++)
      if (!memcmp(kept[i], kept[i - 1], sizeof *kept)) repeated++;
  }
  fprintf(stderr, "uuid_repeats: generated=%ld repeated=%ld forced=%ld\n", made, repeated, forced);
}
