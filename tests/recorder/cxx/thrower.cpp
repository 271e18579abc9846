// thrower.cpp - libthrower.so: exceptions that cross a shared-library
// boundary in both directions (tests/recorder/cxx/test_cxx.py).
#include <stdexcept>

extern "C" void thrower_throw(int code)
{
	throw std::runtime_error("from libthrower " + std::to_string(code));
}

// Calls back into the program and catches what the callback throws.
extern "C" int thrower_catch(void (*callback)(void))
{
	try {
		callback();
	} catch (const std::logic_error &) {
		return 1;
	}
	return 0;
}
