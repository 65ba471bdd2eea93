from engine.connectors.base import ConnectorSpec
SPEC = ConnectorSpec(name="nexmark", source=None, sink=None)
