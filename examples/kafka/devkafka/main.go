// Command devkafka runs a Kafka cluster in memory, for trying the Kafka
// example on a machine without Kafka: franz-go's kfake, which speaks the
// real protocol, with three brokers on 127.0.0.1:9092-9094 and the topic
// outbox.event.order of six partitions. Nothing is kept when it stops
// (SIGINT or SIGTERM). It is no Kafka for production.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	port := flag.Int("port", 9092, "port of the first broker; the others take the next ones")
	topic := flag.String("topic", "outbox.event.order", "topic to create")
	flag.Parse()
	c, err := kfake.NewCluster(kfake.Ports(*port, *port+1, *port+2), kfake.SeedTopics(6, *topic))
	if err != nil {
		fmt.Fprintln(os.Stderr, "devkafka:", err)
		os.Exit(1)
	}
	defer c.Close()
	fmt.Printf("kafka brokers %s, topic %s; Ctrl-C stops\n", strings.Join(c.ListenAddrs(), ","), *topic)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
}
