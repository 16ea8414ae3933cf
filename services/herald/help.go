package herald

// versionUsage is the help of `herald version`.
const versionUsage = `Usage:
  herald version

Prints the version of this herald binary; herald --version does too, and
switchboard, messenger and butler take --version as well.

Example:
  herald version
`
