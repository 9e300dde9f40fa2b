/* native-stack.c: native stacks for the GPU machine, which has no gdb, and whose Python
 * (3.12) faulthandler prints Python frames only: the stack of a thread that crashes outside
 * Go, and, for a hang, every thread's.
 *
 *   gcc -O1 -g -shared -fPIC -o native-stack.so scripts/native-stack.c -ldl
 *   LD_PRELOAD=$PWD/native-stack.so python3 python/tests/test_chaos.py --soak 60 1
 *   kill -s $((SIGRTMIN + 5)) PID      (or: timeout -s RTMIN+5 90 ...): every thread's stack
 *
 * Loaded first, it installs its handler for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT
 * before Go's runtime (loaded with streambridge) installs its own; Go forwards a fault that is
 * not in Go code to the handler it found (sigfwdgo), and faulthandler, enabled later, calls
 * the handler it replaced once it printed Python's stacks: so this one runs last, prints the
 * signal, the faulting address and instruction, and the return addresses found on the
 * faulting thread's stack (each as library+offset (symbol)), then gives the signal its
 * default action. A scan, not an unwind: the driver has no frame pointers, and an unwind
 * from the handler stops in Go's signal trampoline, which has no unwind tables; a word on
 * the stack counts where it points into an executable segment just after a call
 * instruction, so a stale one may show too (read them from the top). glibc dropped its own
 * libSegFault.so (2.35) and catchsegv; gdb is not on the GPU machine.
 *
 * SIGRTMIN+5 sent to the process (neither Python nor Go's runtime in a shared library takes
 * it) reaches one thread, which passes it to every other thread (tgkill) and prints its own
 * stack; each thread prints its own, one at a time, with its id and name (the driver's
 * threads, Go's and Python's), and goes on where it was (a wait it was in is restarted). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sched.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

static const int signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

static void say(const char *s) { (void)!write(2, s, strlen(s)); }

static void where(const char *what, void *pc) {
    char line[512];
    Dl_info info;
    if (dladdr(pc, &info) && info.dli_fname != NULL)
        snprintf(line, sizeof line, "  %s %p = %s+0x%lx (%s)\n", what, pc, info.dli_fname,
                 (unsigned long)((char *)pc - (char *)info.dli_fbase), info.dli_sname ? info.dli_sname : "?");
    else
        snprintf(line, sizeof line, "  %s %p (in no library)\n", what, pc);
    say(line);
}

/* The executable segments of the loaded objects, read at the crash. */
static struct { uintptr_t lo, hi; } text[512];
static int texts;

static int add_text(struct dl_phdr_info *info, size_t size, void *unused) {
    for (int i = 0; i < info->dlpi_phnum && texts < 512; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            text[texts].lo = info->dlpi_addr + ph->p_vaddr;
            text[texts].hi = text[texts].lo + ph->p_memsz;
            texts++;
        }
    }
    return 0;
}

static int in_text(uintptr_t a) {
    for (int i = 0; i < texts; i++)
        if (a >= text[i].lo + 8 && a < text[i].hi)
            return 1;
    return 0;
}

/* Whether the bytes before return address a end in a call: e8 rel32, or ff /2 (register,
 * memory, with displacements of 0, 1 or 4 bytes, a SIB byte or not). */
static int after_call(uintptr_t a) {
    const unsigned char *p = (const unsigned char *)a;
    if (p[-5] == 0xe8)
        return 1;
    for (int len = 2; len <= 7; len++)
        if (p[-len] == 0xff && ((p[-len + 1] >> 3) & 7) == 2)
            return 1;
    return 0;
}

/* The return addresses on the stack of the thread the signal context u is of. */
static void scan(void *uc) {
#if defined(__x86_64__)
    char line[256];
    ucontext_t *u = uc;
    where("pc", (void *)u->uc_mcontext.gregs[REG_RIP]);
    snprintf(line, sizeof line, "  rsp %p rdi %p rsi %p rax %p\n", (void *)u->uc_mcontext.gregs[REG_RSP],
             (void *)u->uc_mcontext.gregs[REG_RDI], (void *)u->uc_mcontext.gregs[REG_RSI],
             (void *)u->uc_mcontext.gregs[REG_RAX]);
    say(line);
    texts = 0;
    dl_iterate_phdr(add_text, NULL);
    pthread_attr_t attr;
    void *base = NULL;
    size_t size = 0;
    uintptr_t sp = (uintptr_t)u->uc_mcontext.gregs[REG_RSP], top = sp + 256 * 1024;
    if (pthread_getattr_np(pthread_self(), &attr) == 0 && pthread_attr_getstack(&attr, &base, &size) == 0 &&
        sp >= (uintptr_t)base && sp < (uintptr_t)base + size)
        top = (uintptr_t)base + size; /* else the signal stack or an unknown one: 256 KiB, at a guess */
    int shown = 0;
    for (uintptr_t *w = (uintptr_t *)sp; (uintptr_t)w < top && shown < 48; w++)
        if (in_text(*w) && after_call(*w)) {
            where("ret", (void *)*w);
            shown++;
        }
#else
    (void)uc;
    say("  (the stack scan reads x86-64 registers only)\n");
#endif
}

static void on_fault(int sig, siginfo_t *si, void *uc) {
    if (sig != SIGABRT && si->si_code <= 0)
        return; /* raised (faulthandler passes the fault on so, with raise): the fault comes again once the
                   handler returns, with its own context */
    char line[256];
    snprintf(line, sizeof line, "\n== native-stack: signal %d (%s) on thread %ld, address %p\n", sig, strsignal(sig),
             (long)syscall(SYS_gettid), si->si_addr);
    say(line);
    scan(uc);
    say("== native-stack: end\n");
    signal(sig, SIG_DFL); /* the fault again, now with the default action: the process ends */
    if (sig == SIGABRT)
        raise(sig);
}

/* ---- Every thread's stack, for a hang ---- */
#define DUMP_SIGNAL (SIGRTMIN + 5)

static atomic_int printing; /* one thread prints at a time */

struct dirent64_ {
    unsigned long long ino;
    long long off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};

/* Sends sig to every thread of the process but this one. */
static void to_every_other_thread(int sig) {
    long self = (long)syscall(SYS_gettid), pid = (long)getpid();
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return;
    char buf[8192];
    long n;
    while ((n = (long)syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
        for (long off = 0; off < n;) {
            struct dirent64_ *d = (struct dirent64_ *)(buf + off);
            long tid = 0;
            for (const char *c = d->name; *c >= '0' && *c <= '9'; c++)
                tid = tid * 10 + (*c - '0');
            if (tid > 0 && tid != self)
                syscall(SYS_tgkill, pid, tid, sig);
            off += d->reclen;
        }
    close(fd);
}

/* Python's word on a thread, where Python is loaded: whether it has a thread state and is
 * attached (holds the GIL, on a build with one). Looked up before the signal goes on to the
 * other threads; the calls read a thread-local and a word of the runtime. */
static int (*gil_check)(void);
static void *(*this_thread_state)(void);

static void on_dump(int sig, siginfo_t *si, void *uc) {
    if (si->si_code != SI_TKILL) { /* sent to the process: to every thread */
        gil_check = (int (*)(void))dlsym(RTLD_DEFAULT, "PyGILState_Check");
        this_thread_state = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
        to_every_other_thread(sig);
    }
    while (atomic_exchange(&printing, 1))
        sched_yield();
    long tid = (long)syscall(SYS_gettid);
    char path[64], name[32] = "?", line[256];
    snprintf(path, sizeof path, "/proc/self/task/%ld/comm", tid);
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        ssize_t got = read(fd, name, sizeof name - 1);
        name[got > 0 ? got - 1 : 0] = 0; /* without its newline */
        close(fd);
    }
    const char *py = "no Python";
    if (gil_check != NULL && this_thread_state != NULL)
        py = this_thread_state() == NULL ? "no Python thread state" : gil_check() ? "Python: attached (holds the GIL)" : "Python: detached";
    snprintf(line, sizeof line, "\n== native-stack: thread %ld (%s) 0x%lx, %s\n", tid, name, (unsigned long)pthread_self(), py);
    say(line);
    scan(uc);
    atomic_store(&printing, 0);
}

__attribute__((constructor)) static void install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    for (unsigned i = 0; i < sizeof signals / sizeof signals[0]; i++)
        sigaction(signals[i], &sa, NULL);
    sa.sa_sigaction = on_dump;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(DUMP_SIGNAL, &sa, NULL);
}
