/*
 * nvtx_lib.c - a shared library with its own NVTX v3 instance (the
 * header-only implementation compiled in, hidden), built twice as
 * libnvtx_a.so and libnvtx_b.so to check that every instance initialises
 * the injection and reports.  NVTX_LIB_NAME names the copy.
 */
#include <nvtx3/nvToolsExt.h>

void NVTX_LIB_FN(void);
void NVTX_LIB_FN(void)
{
	nvtxDomainHandle_t d = nvtxDomainCreateA("shared");
	nvtxEventAttributes_t a = {0};

	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = "lib_" NVTX_LIB_NAME;
	nvtxDomainRangePushEx(d, &a);
	nvtxRangePushA("from_" NVTX_LIB_NAME);
	nvtxRangePop();
	nvtxDomainRangePop(d);
}
