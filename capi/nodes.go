// Autograd nodes as the host sees them: grad_fn, names, next edges.

package main

/*
#define LUCID_NO_PROTOTYPES
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include "lucid.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/pylucid/pylucid/core/autograd"
	"github.com/pylucid/pylucid/core/errs"
)

func getNode(h C.int64_t) (autograd.Node, error) {
	o, ok := handles.get(int64(h))
	if !ok {
		return nil, fmt.Errorf("invalid or released node handle %d", int64(h))
	}
	n, ok := o.(autograd.Node)
	if !ok {
		return nil, fmt.Errorf("handle %d is not an autograd node", int64(h))
	}
	return n, nil
}

//export lucid_node_name
func lucid_node_name(h C.int64_t, buf *C.char, n C.size_t) C.int {
	return call(func() error {
		node, err := getNode(h)
		if err != nil {
			return err
		}
		copyString(node.Name(), buf, n)
		return nil
	})
}

//export lucid_node_next
func lucid_node_next(h C.int64_t, nodes *C.int64_t, outputs *C.int32_t, capacity C.int32_t, count *C.int32_t) C.int {
	return call(func() error {
		node, err := getNode(h)
		if err != nil {
			return err
		}
		edges := node.Next()
		if count == nil || (capacity > 0 && (nodes == nil || outputs == nil)) {
			return errs.Valuef("NULL output pointer")
		}
		*count = C.int32_t(len(edges))
		if int(capacity) < len(edges) {
			return nil // the caller retries with a larger buffer
		}
		ns, os := unsafe.Slice(nodes, len(edges)), unsafe.Slice(outputs, len(edges))
		for i, e := range edges {
			ns[i], os[i] = 0, C.int32_t(e.Output)
			if e.Node != nil {
				ns[i] = C.int64_t(handles.putShared(e.Node))
			}
		}
		return nil
	})
}
