/*
 * faketool.c - a stand-in for another NVTX tool (Nsight Systems): an
 * injection library that logs what it receives to $FAKETOOL_LOG, one line
 * per event:
 *   init | domain <name> | string <text> | push <domain> <message> |
 *   pop <domain> | pushA <message> | popA
 * Domains and strings are kept in small tables; handles are 1-based ids.
 */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char domain_names[32][64];
static int n_domain = 1;
static char string_texts[64][64];
static int n_string = 1;

static void log_line(const char *a, const char *b, const char *c)
{
	const char *path = getenv("FAKETOOL_LOG");
	FILE *f = path ? fopen(path, "a") : NULL;
	if (!f)
		return;
	fprintf(f, "%s%s%s%s%s\n", a, b ? " " : "", b ? b : "", c ? " " : "", c ? c : "");
	fclose(f);
}

static const char *domain_name(nvtxDomainHandle_t d)
{
	uintptr_t i = (uintptr_t)d;
	return i > 0 && i < (uintptr_t)n_domain ? domain_names[i] : "default";
}

static nvtxDomainHandle_t create_a(const char *name)
{
	if (n_domain >= 32)
		return NULL;
	snprintf(domain_names[n_domain], 64, "%s", name);
	log_line("domain", name, NULL);
	return (nvtxDomainHandle_t)(uintptr_t)n_domain++;
}

static nvtxStringHandle_t register_a(nvtxDomainHandle_t d, const char *s)
{
	(void)d;
	if (n_string >= 64)
		return NULL;
	snprintf(string_texts[n_string], 64, "%s", s);
	log_line("string", s, NULL);
	return (nvtxStringHandle_t)(uintptr_t)n_string++;
}

static int push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	const char *msg = "?";
	if (a->messageType == NVTX_MESSAGE_TYPE_ASCII)
		msg = a->message.ascii;
	else if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED)
		msg = string_texts[(uintptr_t)a->message.registered];
	log_line("push", domain_name(d), msg);
	return 0;
}

static int pop(nvtxDomainHandle_t d)
{
	log_line("pop", domain_name(d), NULL);
	return 0;
}

static int push_a(const char *m)
{
	log_line("pushA", m, NULL);
	return 0;
}

static int pop_a(void)
{
	log_line("popA", NULL, NULL);
	return 0;
}

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get);
int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
	const NvtxExportTableCallbacks *e = get(NVTX_ETID_CALLBACKS);
	NvtxFunctionTable t;
	unsigned int n;

	log_line("init", NULL, NULL);
	if (!e || !e->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n))
		return 0;
	*t[NVTX_CBID_CORE_RangePushA] = (NvtxFunctionPointer)push_a;
	*t[NVTX_CBID_CORE_RangePop] = (NvtxFunctionPointer)pop_a;
	if (!e->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n))
		return 0;
	*t[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)create_a;
	*t[NVTX_CBID_CORE2_DomainRegisterStringA] = (NvtxFunctionPointer)register_a;
	*t[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)push_ex;
	*t[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)pop;
	return 1;
}
