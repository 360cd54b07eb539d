package scaletest

import (
	"context"
	"fmt"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/ghost-scm/ghost/internal/etcdserver"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/countstore"
)

// meter counts requests: the object store's by S3's price classes, and
// etcd's (unary calls, and every message a client sends on a stream: a
// lease keep-alive, a watch creation).
type meter struct {
	get, put, list, del atomic.Int64
	etcd                atomic.Int64
}

// counts is a meter's reading.
type counts struct {
	Get, Put, List, Delete, Etcd int64
}

func (m *meter) read() counts {
	return counts{Get: m.get.Load(), Put: m.put.Load(), List: m.list.Load(), Delete: m.del.Load(), Etcd: m.etcd.Load()}
}

func (c counts) sub(d counts) counts {
	return counts{Get: c.Get - d.Get, Put: c.Put - d.Put, List: c.List - d.List, Delete: c.Delete - d.Delete, Etcd: c.Etcd - d.Etcd}
}

func (c counts) add(d counts) counts {
	return counts{Get: c.Get + d.Get, Put: c.Put + d.Put, List: c.List + d.List, Delete: c.Delete + d.Delete, Etcd: c.Etcd + d.Etcd}
}

// store is the object-store total.
func (c counts) store() int64 { return c.Get + c.Put + c.List + c.Delete }

func (c counts) String() string {
	return fmt.Sprintf("GET %d PUT %d LIST %d DELETE %d etcd %d", c.Get, c.Put, c.List, c.Delete, c.Etcd)
}

// observe is a countstore.Observer. S3 prices GET and ranged GET alike
// (class B), and PUT, conditional PUT, COPY and LIST alike (class A);
// LIST is kept apart because the issue asks for it. DELETE is free.
func (m *meter) observe(op string, _ error) {
	switch op {
	case countstore.OpGet, countstore.OpGetRange:
		m.get.Add(1)
	case countstore.OpPut, countstore.OpPutIfMatch, countstore.OpPutIfAbsent, countstore.OpCopy:
		m.put.Add(1)
	case countstore.OpList:
		m.list.Add(1)
	case countstore.OpDelete:
		m.del.Add(1)
	}
}

// wrap returns inner with every request counted on m.
func (m *meter) wrap(inner objstore.Store) objstore.Store { return countstore.New(inner, m.observe) }

// etcdClient opens a client to endpoint that counts what it sends on m.
func (m *meter) etcdClient(endpoint string) (*clientv3.Client, error) {
	return etcdserver.NewClient([]string{endpoint}, func(c *clientv3.Config) {
		c.DialOptions = append(c.DialOptions,
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				m.etcd.Add(1)
				return invoker(ctx, method, req, reply, cc, opts...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				s, err := streamer(ctx, desc, cc, method, opts...)
				if err != nil {
					return nil, err
				}
				return &countedStream{ClientStream: s, m: m}, nil
			}))
	})
}

// countedStream counts each message the client sends on a stream.
type countedStream struct {
	grpc.ClientStream
	m *meter
}

func (s *countedStream) SendMsg(msg any) error {
	s.m.etcd.Add(1)
	return s.ClientStream.SendMsg(msg)
}
