# tests/recorder/cxx: C++ exceptions under the preload after libunwind was
# loaded for a stack capture (test_cxx.py), built into build/tests/cxx/.
# Included by tests/tests.mk.

CXX_T := $(BUILD)/tests/cxx
CXX_TEST_FLAGS := -std=c++17 -Wall -Wextra -Werror -O1 -g -pthread

tests-aux:: $(CXX_T)/cxx_throw

$(CXX_T)/libthrower.so: tests/recorder/cxx/thrower.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXX_TEST_FLAGS) -fPIC -shared -o $@ $<

$(CXX_T)/cxx_throw: tests/recorder/cxx/cxx_throw.cpp $(CXX_T)/libthrower.so
	$(CXX) $(CXX_TEST_FLAGS) -o $@ $< -L$(CXX_T) -Wl,-rpath,'$$ORIGIN' -lthrower -ldl
