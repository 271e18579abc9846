// cxx_throw.cpp - C++ exception handling under the preload after a native
// stack capture has loaded libunwind (tests/recorder/cxx/test_cxx.py).
//
//   cxx_throw            capture, then throw/catch 7 ways; exit 0 only if
//                        every exception was caught where expected
//   cxx_throw policy     (stand-in only) reports waits without sleeping:
//                        16 decreasing from 5 ms, 4 shorter, 1 of 10 ms,
//                        10 increasing from 11 ms, 5 of 0.9 ms; prints
//                        "reported 36"
//   cxx_throw bench N    N captures 30 frames deep (DLBN_STACKS=all, stand-in
//                        only); prints "first_capture_us" and "capture_us"
//
// Prints "unwind_raise=<object defining _Unwind_RaiseException as the
// program sees it>", "backtrace=<object defining backtrace>" and
// "libunwind_loaded=<0|1>".
#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <stdexcept>
#include <thread>

extern "C" void thrower_throw(int code);
extern "C" int thrower_catch(void (*callback)(void));

using test_wait_fn = uint64_t (*)(uint8_t, uint64_t);

static int wait_pipe[2];

// One main-thread wait of ~20 ms that the recorder treats as a possible batch
// wait: the stand-in's test entry point, or a real poll on a pipe.
static uint64_t loader_like_wait(uint64_t dur_ns)
{
	auto test_wait = reinterpret_cast<test_wait_fn>(dlsym(RTLD_DEFAULT, "dlbn_test_wait"));
	if (test_wait)
		return test_wait(15 /* DLBN_REC_POLL */, dur_ns);
	if (pipe(wait_pipe) != 0)
		std::exit(2);
	std::thread writer([dur_ns] {
		std::this_thread::sleep_for(std::chrono::nanoseconds(dur_ns));
		if (write(wait_pipe[1], "x", 1) != 1)
			std::exit(2);
	});
	struct pollfd p = {wait_pipe[0], POLLIN, 0};
	poll(&p, 1, 5000);
	char c;
	if (read(wait_pipe[0], &c, 1) != 1)
		std::exit(2);
	writer.join();
	close(wait_pipe[0]);
	close(wait_pipe[1]);
	return 0;
}

static const char *object_of(const char *sym)
{
	void *addr = dlsym(RTLD_DEFAULT, sym);
	Dl_info info;
	if (!addr || !dladdr(addr, &info) || !info.dli_fname)
		return "(none)";
	return info.dli_fname;
}

static void throws_logic(void)
{
	throw std::logic_error("from the program");
}

static int nested_rethrow(void)
{
	try {
		try {
			throw std::runtime_error("inner");
		} catch (const std::runtime_error &) {
			throw; // rethrow through the outer handler
		}
	} catch (const std::exception &) {
		return 1;
	}
	return 0;
}

static int run_throws(void)
{
	int caught = 0;

	try { // 1: plain, in the program
		throw 42;
	} catch (int v) {
		caught += v == 42;
	}
	try { // 2: thrown in libthrower, caught here
		thrower_throw(7);
	} catch (const std::runtime_error &e) {
		caught += std::strstr(e.what(), "libthrower 7") != nullptr;
	}
	caught += thrower_catch(throws_logic); // 3: thrown here, caught in the library
	caught += nested_rethrow();	       // 4: rethrow
	int in_thread = 0;		       // 5: thrown and caught in a std::thread
	std::thread t([&in_thread] {
		try {
			thrower_throw(5);
		} catch (const std::exception &) {
			in_thread = 1;
		}
	});
	t.join();
	caught += in_thread;
	auto fut = std::async(std::launch::async, [] { // 6: thread -> main via future
		thrower_throw(6);
		return 0;
	});
	try {
		fut.get();
	} catch (const std::runtime_error &) {
		caught += 1;
	}
	try { // 7: std library throws (bad_alloc-free: out_of_range)
		std::string s("x");
		(void)s.at(10);
	} catch (const std::out_of_range &) {
		caught += 1;
	}
	return caught;
}

static uint64_t deep_capture(int depth, uint64_t dur_ns)
{
	if (depth > 0) {
		uint64_t r = deep_capture(depth - 1, dur_ns);
		__asm__ volatile("" ::: "memory"); // keep the frames (no tail call)
		return r;
	}
	return loader_like_wait(dur_ns);
}

static int report_policy_waits(void)
{
	using wait_as_fn = void (*)(uint8_t, uint64_t);
	auto wait_as = reinterpret_cast<wait_as_fn>(dlsym(RTLD_DEFAULT, "dlbn_test_wait_as"));
	int n = 0;

	if (!wait_as)
		return 2;
	for (int i = 0; i < 16; i++, n++)
		wait_as(15, 5000000 - (uint64_t)i * 100000);
	for (int i = 0; i < 4; i++, n++)
		wait_as(15, 3000000 - (uint64_t)i * 100000);
	wait_as(15, 10000000);
	n++;
	for (int i = 0; i < 10; i++, n++)
		wait_as(15, 11000000 + (uint64_t)i * 1000000);
	for (int i = 0; i < 5; i++, n++)
		wait_as(15, 900000);
	std::printf("reported %d\n", n);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && std::strcmp(argv[1], "policy") == 0)
		return report_policy_waits();
	if (argc >= 3 && std::strcmp(argv[1], "bench") == 0) {
		long n = std::atol(argv[2]);
		double first = (double)deep_capture(30, 1100000) / 1000.0;
		double sum = 0;
		for (long i = 0; i < n; i++)
			sum += (double)deep_capture(30, 1100000);
		std::printf("first_capture_us %.1f\ncapture_us %.1f\n", first,
			    sum / (double)n / 1000.0);
		return 0;
	}
	loader_like_wait(20 * 1000 * 1000); // the capture happens here, before any throw
	std::printf("libunwind_loaded=%d\n",
		    dlopen("libunwind.so.8", RTLD_NOLOAD | RTLD_LAZY) != nullptr);
	std::printf("unwind_raise=%s\n", object_of("_Unwind_RaiseException"));
	std::printf("backtrace=%s\n", object_of("backtrace"));
	int caught = run_throws();
	std::printf("caught %d/7\n", caught);
	return caught == 7 ? 0 : 1;
}
