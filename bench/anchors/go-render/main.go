// go-render: the peer anchor of bench/render. It renders the original service-loadbalancer's
// config (template.cfg, a port of its Go text/template) for a cluster that bench/render writes
// from bench/synthetic.ts, and times the renders, so that both engines render the same cluster.
//
//	go build -o /tmp/go-render . && /tmp/go-render -cluster FILE [-iters K] [-json] [-out FILE]
//
// FILE is a Kubernetes List (Services and EndpointSlices), read as the original read its listers.
package main

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"text/template"
	"time"
)

//go:embed template.cfg
var templateText string

// service is the original's: one per Service port, what its template reads.
type service struct {
	Name                string
	Ep                  []string
	BackendPort         int
	FrontendPort        int
	Host                string
	SslTerm             bool
	AclMatch            string
	Algorithm           string
	SessionAffinity     bool
	CookieStickySession bool
}

// item is one decoded Service or EndpointSlice, the fields the original used.
type item struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Type            string `json:"type"`
		SessionAffinity string `json:"sessionAffinity"`
		Ports           []struct {
			Port       int    `json:"port"`
			TargetPort int    `json:"targetPort"`
			Protocol   string `json:"protocol"`
		} `json:"ports"`
	} `json:"spec"`
	Ports []struct {
		Port int `json:"port"`
	} `json:"ports"`
	Endpoints []struct {
		Addresses  []string `json:"addresses"`
		Conditions struct {
			Ready *bool `json:"ready"`
		} `json:"conditions"`
	} `json:"endpoints"`
}

// svc and slice keep of each item what services() reads: the process then holds little more
// than the original's services while it renders, and its peak RSS is the renders'.
type svc struct {
	name, namespace, typ, affinity string
	annotations                    map[string]string
	ports                          []svcPort
}

type svcPort struct {
	port, targetPort int
	protocol         string
}

type slice struct {
	ports     []int
	addresses []string
}

// readCluster decodes the List's items one at a time, not the whole List at once.
func readCluster(path string) (svcs []svc, slices map[string][]slice, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReader(f))
	slices = map[string][]slice{}
	if _, err = dec.Token(); err != nil {
		return
	}
	for dec.More() {
		var key json.Token
		if key, err = dec.Token(); err != nil {
			return
		}
		if key != "items" {
			var skip json.RawMessage
			if err = dec.Decode(&skip); err != nil {
				return
			}
			continue
		}
		if _, err = dec.Token(); err != nil {
			return
		}
		for dec.More() {
			var it item
			if err = dec.Decode(&it); err != nil {
				return
			}
			switch it.Kind {
			case "Service":
				s := svc{name: it.Metadata.Name, namespace: it.Metadata.Namespace, typ: it.Spec.Type,
					affinity: it.Spec.SessionAffinity, annotations: it.Metadata.Annotations}
				for _, p := range it.Spec.Ports {
					s.ports = append(s.ports, svcPort{p.Port, p.TargetPort, p.Protocol})
				}
				svcs = append(svcs, s)
			case "EndpointSlice":
				var sl slice
				for _, p := range it.Ports {
					sl.ports = append(sl.ports, p.Port)
				}
				for _, e := range it.Endpoints {
					if e.Conditions.Ready == nil || *e.Conditions.Ready {
						sl.addresses = append(sl.addresses, e.Addresses...)
					}
				}
				key := it.Metadata.Namespace + "/" + it.Metadata.Labels["kubernetes.io/service-name"]
				slices[key] = append(slices[key], sl)
			}
		}
		if _, err = dec.Token(); err != nil {
			return
		}
	}
	return
}

// services follows the original's getServices for the Services the synthetic cluster has (HTTP,
// one port each): the name (with ":port" unless the port is 80), the ready addresses of the
// target port, the lb.host and lb.algorithm annotations, and sorted by name.
func services(svcs []svc, slices map[string][]slice) []service {
	var http []service
	for _, s := range svcs {
		if s.typ == "LoadBalancer" {
			continue
		}
		for _, p := range s.ports {
			if p.protocol == "UDP" {
				continue
			}
			var ep []string
			for _, sl := range slices[s.namespace+"/"+s.name] {
				for _, port := range sl.ports {
					if port != p.targetPort {
						continue
					}
					for _, a := range sl.addresses {
						ep = append(ep, fmt.Sprintf("%v:%v", a, port))
					}
				}
			}
			if len(ep) == 0 {
				continue
			}
			name := s.name
			if p.port != 80 {
				name = fmt.Sprintf("%v:%v", name, p.port)
			}
			algorithm := "roundrobin"
			if a, ok := s.annotations["serviceloadbalancer/lb.algorithm"]; ok {
				algorithm = a
			}
			http = append(http, service{
				Name:         name,
				Ep:           ep,
				BackendPort:  p.targetPort,
				FrontendPort: 80,
				Host:         s.annotations["serviceloadbalancer/lb.host"],
				Algorithm:    algorithm,
				// The original tests sessionAffinity != "", which the API server's default "None"
				// passes too; ClientIP gives the stick tables servicelb renders for the same cluster.
				SessionAffinity: s.affinity == "ClientIP",
			})
		}
	}
	sort.Slice(http, func(i, j int) bool { return http[i].Name < http[j].Name })
	return http
}

func render(w io.Writer, conf map[string]interface{}) error {
	// Parsed on every render, as the original parsed its template file on every write.
	t, err := template.New("template.cfg").Parse(templateText)
	if err != nil {
		return err
	}
	return t.Execute(w, conf)
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

func main() {
	cluster := flag.String("cluster", "", "a Kubernetes List (JSON) of Services and EndpointSlices")
	iters := flag.Int("iters", 5, "timed renders, after one untimed")
	asJSON := flag.Bool("json", false, "print one JSON object")
	out := flag.String("out", "", "also write the config to this file")
	flag.Parse()
	if *cluster == "" {
		fmt.Fprintln(os.Stderr, "go-render: -cluster FILE is required")
		os.Exit(2)
	}
	svcs, slices, err := readCluster(*cluster)
	if err != nil {
		fmt.Fprintf(os.Stderr, "go-render: %v: %v\n", *cluster, err)
		os.Exit(1)
	}
	http := services(svcs, slices)
	svcs, slices = nil, nil
	// The decoded items are garbage now: collected before the renders run on the services alone.
	runtime.GC()
	endpoints := 0
	for _, s := range http {
		endpoints += len(s.Ep)
	}
	// What the original passed: no syslog, no certificate, every Service over HTTP.
	conf := map[string]interface{}{
		"startSyslog":    "false",
		"sslCert":        "",
		"defLbAlgorithm": "roundrobin",
		"services":       map[string][]service{"http": http, "httpsTerm": nil, "tcp": nil},
	}
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintf(os.Stderr, "go-render: %v\n", err)
			os.Exit(1)
		}
		w := bufio.NewWriter(f)
		if err := render(w, conf); err != nil {
			panic(err)
		}
		if err := w.Flush(); err != nil {
			panic(err)
		}
		f.Close()
	}
	size := &countWriter{}
	if err := render(size, conf); err != nil {
		panic(err)
	}
	start := time.Now()
	for k := 0; k < *iters; k++ {
		if err := render(io.Discard, conf); err != nil {
			panic(err)
		}
	}
	ms := float64(time.Since(start).Microseconds()) / 1000 / float64(*iters)
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	perService := 0
	if len(http) > 0 {
		perService = endpoints / len(http)
	}
	if *asJSON {
		fmt.Printf("{\"engine\":\"go-text-template\",\"services\":%d,\"endpoints\":%d,\"msPerRender\":%.1f,\"bytes\":%d,\"heapSysMiB\":%.0f}\n",
			len(http), perService, ms, size.n, float64(m.HeapSys)/(1<<20))
		return
	}
	fmt.Printf("go text/template: %d services x %d endpoints: %.1f ms/render, %d bytes\n", len(http), perService, ms, size.n)
}
