# tests/recorder/nvtx: NVTX injection tests (test_nvtx.py) and the recorder
# stand-in shared with tests/recorder/cxx, built into build/tests/nvtx/.
# Included by tests/tests.mk.

NVTX_T := $(BUILD)/tests/nvtx
NVTX_TEST_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g -I$(CUDA_HOME)/include

tests-aux:: $(NVTX_T)/libdlbn_standin.so $(NVTX_T)/nvtx_app $(NVTX_T)/libfaketool.so

# The stand-in: this area's modules + a minimal recorder core (see
# standin_recorder.c), usable before/without the real core.
$(NVTX_T)/libdlbn_standin.so: tests/recorder/nvtx/standin_recorder.c libintercept/nvtx_inject.c \
		libintercept/stacks.c tests/recorder/nvtx/standin.map $(wildcard libintercept/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) -shared -Wl,--version-script=tests/recorder/nvtx/standin.map -Wl,--no-undefined \
		-o $@ tests/recorder/nvtx/standin_recorder.c libintercept/nvtx_inject.c libintercept/stacks.c \
		$(MSGPACK_LIBS) -ldl -lpthread

$(NVTX_T)/libnvtx_a.so: tests/recorder/nvtx/nvtx_lib.c
	@mkdir -p $(dir $@)
	$(CC) $(NVTX_TEST_CFLAGS) -fPIC -shared -DNVTX_LIB_NAME='"a"' -DNVTX_LIB_FN=nvtx_lib_a -o $@ $< -ldl -lpthread

$(NVTX_T)/libnvtx_b.so: tests/recorder/nvtx/nvtx_lib.c
	@mkdir -p $(dir $@)
	$(CC) $(NVTX_TEST_CFLAGS) -fPIC -shared -DNVTX_LIB_NAME='"b"' -DNVTX_LIB_FN=nvtx_lib_b -o $@ $< -ldl -lpthread

$(NVTX_T)/nvtx_app: tests/recorder/nvtx/nvtx_app.c $(NVTX_T)/libnvtx_a.so $(NVTX_T)/libnvtx_b.so
	$(CC) $(NVTX_TEST_CFLAGS) -o $@ $< -L$(NVTX_T) -Wl,-rpath,'$$ORIGIN' -lnvtx_a -lnvtx_b -ldl -lpthread

$(NVTX_T)/libfaketool.so: tests/recorder/nvtx/faketool.c
	@mkdir -p $(dir $@)
	$(CC) $(NVTX_TEST_CFLAGS) -fPIC -shared -o $@ $<
