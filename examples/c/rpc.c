/*
 * rpc.c -- a remote procedure call over SISCI data interrupts: the client sends
 * "add A B" to the server's interrupt, the server answers the sum on the client's
 * interrupt. The server takes requests in a callback; the client waits for answers.
 *
 *   rpc server <client node id> [calls]
 *   rpc client <server node id> [calls]
 *
 * The server's interrupt is number 3, the client's number 4 (SCI_FLAG_FIXED_INTNO).
 * Built by smartio's test suite with -Wall -Werror against the installed headers.
 */
#include <sisci_api.h>
#include <sisci_error.h>
#include <sisci_types.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ADAPTER 0
#define SERVER_INTNO 3
#define CLIENT_INTNO 4

struct request {
    uint32_t call;
    int64_t a;
    int64_t b;
};

struct answer {
    uint32_t call;
    int64_t sum;
};

static void check(const char *what, sci_error_t err)
{
    if (err != SCI_ERR_OK) {
        fprintf(stderr, "%s: %s (0x%x)\n", what, SCIGetErrorString(err), (unsigned)err);
        exit(1);
    }
}

struct server_state {
    sci_remote_data_interrupt_t reply;
    _Atomic uint32_t served; /* written by the callback thread, read by main */
    uint32_t calls;
};

static sci_callback_action_t on_request(void *arg, sci_local_data_interrupt_t interrupt,
                                        void *data, unsigned int length, sci_error_t status)
{
    struct server_state *state = arg;
    (void)interrupt;
    if (status != SCI_ERR_OK || length != sizeof(struct request)) {
        fprintf(stderr, "server: a bad request (%u bytes, status 0x%x)\n", length,
                (unsigned)status);
        exit(1);
    }
    struct request req;
    memcpy(&req, data, sizeof req);
    struct answer ans = { req.call, req.a + req.b };
    sci_error_t err;
    SCITriggerDataInterrupt(state->reply, &ans, sizeof ans, SCI_NO_FLAGS, &err);
    check("SCITriggerDataInterrupt (answer)", err);
    uint32_t served = ++state->served;
    return served == state->calls ? SCI_CALLBACK_CANCEL : SCI_CALLBACK_CONTINUE;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s server|client <peer node id> [calls]\n", argv[0]);
        return 2;
    }
    int server = strcmp(argv[1], "server") == 0;
    unsigned int peer = (unsigned int)strtoul(argv[2], NULL, 0);
    uint32_t calls = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 0) : 1000;

    sci_error_t err;
    sci_desc_t sd;
    SCIInitialize(SCI_NO_FLAGS, &err);
    check("SCIInitialize", err);
    SCIOpen(&sd, SCI_NO_FLAGS, &err);
    check("SCIOpen", err);

    sci_local_data_interrupt_t inbox;
    sci_remote_data_interrupt_t outbox;
    unsigned int number = server ? SERVER_INTNO : CLIENT_INTNO;
    struct server_state state = { NULL, 0, calls };

    if (server) {
        /* Connect to the client's answer interrupt first: the callback needs it. */
        SCIConnectDataInterrupt(sd, &outbox, peer, ADAPTER, CLIENT_INTNO, SCI_INFINITE_TIMEOUT,
                                SCI_NO_FLAGS, &err);
        check("SCIConnectDataInterrupt", err);
        state.reply = outbox;
        SCICreateDataInterrupt(sd, &inbox, ADAPTER, &number, on_request, &state,
                               SCI_FLAG_FIXED_INTNO | SCI_FLAG_USE_CALLBACK, &err);
        check("SCICreateDataInterrupt", err);
        while (state.served < calls) {
            usleep(1000);
        }
        printf("server: answered %u calls\n", calls);
    } else {
        SCICreateDataInterrupt(sd, &inbox, ADAPTER, &number, NULL, NULL, SCI_FLAG_FIXED_INTNO,
                               &err);
        check("SCICreateDataInterrupt", err);
        SCIConnectDataInterrupt(sd, &outbox, peer, ADAPTER, SERVER_INTNO, SCI_INFINITE_TIMEOUT,
                                SCI_NO_FLAGS, &err);
        check("SCIConnectDataInterrupt", err);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (uint32_t call = 1; call <= calls; call++) {
            struct request req = { call, (int64_t)call * 1000, -(int64_t)call / 3 };
            SCITriggerDataInterrupt(outbox, &req, sizeof req, SCI_NO_FLAGS, &err);
            check("SCITriggerDataInterrupt (request)", err);
            struct answer ans;
            unsigned int length = sizeof ans;
            SCIWaitForDataInterrupt(inbox, &ans, &length, 10000, SCI_NO_FLAGS, &err);
            check("SCIWaitForDataInterrupt", err);
            if (length != sizeof ans || ans.call != call || ans.sum != req.a + req.b) {
                fprintf(stderr, "call %u: a wrong answer\n", call);
                return 1;
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 1e3;
        printf("client: %u calls answered correctly, %.1f us per call\n", calls, us / calls);
        /* A wait with nothing coming times out. */
        struct answer none;
        unsigned int length = sizeof none;
        SCIWaitForDataInterrupt(inbox, &none, &length, 20, SCI_NO_FLAGS, &err);
        if (err != SCI_ERR_TIMEOUT) {
            fprintf(stderr, "an idle wait returned 0x%x, not SCI_ERR_TIMEOUT\n", (unsigned)err);
            return 1;
        }
    }

    SCIDisconnectDataInterrupt(outbox, SCI_NO_FLAGS, &err);
    check("SCIDisconnectDataInterrupt", err);
    /* Busy while the peer is still connected to ours. */
    for (;;) {
        SCIRemoveDataInterrupt(inbox, SCI_NO_FLAGS, &err);
        if (err != SCI_ERR_BUSY) {
            break;
        }
        usleep(1000);
    }
    check("SCIRemoveDataInterrupt", err);
    SCIClose(sd, SCI_NO_FLAGS, &err);
    check("SCIClose", err);
    SCITerminate();
    return 0;
}
