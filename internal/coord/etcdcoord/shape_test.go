package etcdcoord_test

import (
	"context"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// txnShape is what one transaction sent: its compares, and its Then and
// Else operations by kind and bytes.
type txnShape struct {
	cmps, puts, dels, gets, elseOps int
	putBytes                        int
}

// shapeKV records the shape of every transaction sent through it.
type shapeKV struct {
	clientv3.KV
	mu     sync.Mutex
	shapes []txnShape
}

func (k *shapeKV) Txn(ctx context.Context) clientv3.Txn {
	return &shapeTxn{Txn: k.KV.Txn(ctx), kv: k}
}

func (k *shapeKV) take() []txnShape {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.shapes
	k.shapes = nil
	return s
}

type shapeTxn struct {
	clientv3.Txn
	kv *shapeKV
	s  txnShape
}

func (t *shapeTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	t.s.cmps += len(cs)
	t.Txn = t.Txn.If(cs...)
	return t
}

func (t *shapeTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	for _, op := range ops {
		switch {
		case op.IsPut():
			t.s.puts++
			t.s.putBytes += len(op.KeyBytes()) + len(op.ValueBytes())
		case op.IsDelete():
			t.s.dels++
		default:
			t.s.gets++
		}
	}
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *shapeTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.s.elseOps += len(ops)
	t.Txn = t.Txn.Else(ops...)
	return t
}

func (t *shapeTxn) Commit() (*clientv3.TxnResponse, error) {
	t.kv.mu.Lock()
	t.kv.shapes = append(t.kv.shapes, t.s)
	t.kv.mu.Unlock()
	return t.Txn.Commit()
}
