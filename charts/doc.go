// Package charts holds the tests of the Helm chart in charts/herald (build tag integration, `make integration`
// or `make chart-test`): the rendered objects are accepted by a real kube-apiserver (server-side dry run), and
// the RBAC the chart gives each ServiceAccount allows what Herald's code does and refuses the rest, checked with
// real requests made as that ServiceAccount (impersonation). The tests render the chart with the helm binary the
// lab builds (e2e/lab/install.sh helm; $HERALD_HELM overrides its path).
//
// One test runs without the tag, in `make test`: schema_test.go holds values.schema.json against values.yaml
// (every key described, nothing extra) and validates the chart's example values with the schema library Helm
// itself uses.
package charts
