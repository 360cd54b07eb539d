package hooks

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/record"
	"github.com/ghost-scm/ghost/internal/webhook"
)

// Bounds of the delivery log: the newest MaxDeliveries deliveries of a
// hook, at most MaxDeliveryLogBytes of them in all, each body kept up to
// MaxLoggedBody (a longer one is cut, and cannot be redelivered).
const (
	MaxDeliveries       = 100
	MaxDeliveryLogBytes = 8 << 20
	MaxLoggedBody       = 256 << 10
	// trimEvery is how many deliveries a dispatcher records between two
	// trims of the log (one LIST each).
	trimEvery = 10
)

// Delivery is one attempt to deliver an event, as the delivery log keeps
// it. It holds no secret: the signature header is derived from the
// hook's secret, which is not kept.
type Delivery struct {
	ID         string    `json:"id"`
	GUID       string    `json:"guid"`
	Event      string    `json:"event"`
	Action     string    `json:"action,omitempty"`
	Stream     string    `json:"stream"`
	At         time.Time `json:"delivered_at"`
	Redelivery bool      `json:"redelivery"`
	// Duration of the attempt in seconds.
	Duration float64 `json:"duration"`
	// StatusCode is the receiver's HTTP status; 0 when none was read.
	StatusCode int `json:"status_code"`
	// Status is "OK", the receiver's status text, or what failed
	// ("connection refused", "address refused: ...").
	Status string `json:"status"`
	// Outcome: "delivered", "retrying" (another attempt will follow) or
	// "failed" (given up).
	Outcome         string              `json:"outcome"`
	Attempt         int                 `json:"attempt"`
	RequestHeaders  map[string][]string `json:"request_headers"`
	RequestBody     json.RawMessage     `json:"request_body,omitempty"`
	BodyTruncated   bool                `json:"body_truncated,omitempty"`
	ResponseHeaders map[string][]string `json:"response_headers,omitempty"`
	ResponseBody    string              `json:"response_body,omitempty"`
}

// deliveryKey sorts the newest first: the inverted time, then randomness.
func deliveryKey(hook string, at time.Time) (key, id string) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	id = fmt.Sprintf("%016x%s", uint64(math.MaxInt64-at.UnixMilli()), hex.EncodeToString(b[:]))
	return deliveriesPrefix + hook + "/" + id, id
}

var deliveryCodec = func() record.Codec[Delivery] {
	c := record.JSON[Delivery]()
	c.Max = MaxLoggedBody + 64<<10
	return c
}()

// action reads a payload's "action", for the log's listing.
func action(body []byte) string {
	var a struct {
		Action string `json:"action"`
	}
	_ = json.Unmarshal(body, &a)
	return a.Action
}

// logDelivery records one attempt. The delivery log is a record of what
// happened, not a part of delivering: a failure to write it is logged and
// changes nothing else.
//
// Outcome unknown: the record is one unconditional PUT under a key of its
// own; it is there or not, and either is harmless.
func (s *Store) logDelivery(ctx context.Context, hook string, d Delivery, body []byte) {
	key, id := deliveryKey(hook, d.At)
	d.ID = id
	if d.Action == "" {
		d.Action = action(body)
	}
	if len(body) > MaxLoggedBody {
		d.BodyTruncated = true
	} else {
		d.RequestBody = json.RawMessage(body)
	}
	b, err := json.Marshal(&d)
	if err != nil {
		return
	}
	if _, err := s.opts.Store.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
		s.logger.WarnContext(ctx, "recording a webhook delivery failed", "hook", hook, "guid", d.GUID, "err", err)
	}
}

// trimDeliveries deletes the deliveries past the newest MaxDeliveries or
// MaxDeliveryLogBytes. Best effort: a delete that fails is tried again
// by the next trim.
func (s *Store) trimDeliveries(ctx context.Context, hook string) {
	n, total := 0, int64(0)
	_ = objstore.Walk(ctx, s.opts.Store, deliveriesPrefix+hook+"/", func(o objstore.Info) error {
		n++
		total += o.Size
		if n > MaxDeliveries || total > MaxDeliveryLogBytes {
			_ = s.opts.Store.Delete(ctx, o.Key)
		}
		return nil
	})
}

// Deliveries returns a hook's newest deliveries (at most limit, up to
// MaxDeliveries), newest first, without their bodies and headers.
func (s *Store) Deliveries(ctx context.Context, sc Scope, id int64, limit int) ([]Delivery, error) {
	if _, err := s.get(ctx, sc, id); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > MaxDeliveries {
		limit = MaxDeliveries
	}
	page, err := s.opts.Store.List(ctx, deliveriesPrefix+hookKey(sc, id)+"/", "", limit)
	if err != nil {
		return nil, storeErr("list deliveries", err)
	}
	out := make([]Delivery, 0, len(page))
	for _, o := range page {
		d, _, err := record.Get(ctx, s.opts.Store, deliveryCodec, o.Key)
		if errors.Is(err, objstore.ErrNotFound) {
			continue // trimmed meanwhile
		}
		if err != nil {
			return nil, storeErr("read a delivery", err)
		}
		d.RequestHeaders, d.RequestBody, d.ResponseHeaders, d.ResponseBody = nil, nil, nil, ""
		out = append(out, *d)
	}
	return out, nil
}

// Delivery returns one delivery of a hook whole.
func (s *Store) Delivery(ctx context.Context, sc Scope, id int64, deliveryID string) (Delivery, error) {
	if _, err := s.get(ctx, sc, id); err != nil {
		return Delivery{}, err
	}
	if !validDeliveryID(deliveryID) {
		return Delivery{}, fmt.Errorf("%w: delivery %q", ErrNotFound, deliveryID)
	}
	d, _, err := record.Get(ctx, s.opts.Store, deliveryCodec, deliveriesPrefix+hookKey(sc, id)+"/"+deliveryID)
	if errors.Is(err, objstore.ErrNotFound) {
		return Delivery{}, fmt.Errorf("%w: delivery %s", ErrNotFound, deliveryID)
	}
	if err != nil {
		return Delivery{}, storeErr("read a delivery", err)
	}
	return *d, nil
}

func validDeliveryID(id string) bool {
	if len(id) != 24 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && id == strings.ToLower(id)
}

// Redeliver queues a delivery's event again, for its hook: the same body
// and delivery id, marked as a redelivery.
func (s *Store) Redeliver(ctx context.Context, sc Scope, id int64, deliveryID string) error {
	d, err := s.Delivery(ctx, sc, id, deliveryID)
	if err != nil {
		return err
	}
	if d.BodyTruncated || len(d.RequestBody) == 0 {
		return fmt.Errorf("%w: delivery %s: its body (over %d bytes) was not kept, so it cannot be sent again", ErrInvalid, deliveryID, MaxLoggedBody)
	}
	h, err := s.get(ctx, sc, id)
	if err != nil {
		return err
	}
	return s.enqueueOneOn(ctx, sc, d.Stream, h, queued{Event: d.Event, Body: d.RequestBody, GUID: d.GUID, Redelivery: true})
}

// resultOf turns a sender's result into a delivery log entry.
func resultOf(res webhook.Result, err error) (code int, status string, respHeaders map[string][]string, excerpt string) {
	code = res.Status
	switch {
	case err == nil:
		status = "OK"
	case res.StatusText != "":
		status = res.StatusText
	default:
		status = err.Error()
	}
	return code, status, res.ResponseHeaders, strings.ToValidUTF8(string(res.Excerpt), "\uFFFD")
}
