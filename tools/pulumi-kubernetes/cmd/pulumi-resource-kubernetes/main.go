// Command pulumi-resource-kubernetes serves the Pulumi Kubernetes resource provider.
//
// The upstream main embeds a generated schema (schema-embed.json) that is not part of the Go
// module. The engine needs the schema only for code generation and `pulumi import`; create, update,
// preview, refresh and destroy work from the resource inputs alone. So this main serves a minimal
// schema naming the package and its version.
package main

import (
	"fmt"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

func main() {
	schema := []byte(fmt.Sprintf(`{"name":"kubernetes","version":%q}`, version.Version))
	provider.Serve("kubernetes", version.Version, schema, []byte("{}"))
}
